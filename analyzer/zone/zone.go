// Package zone defines an Analyzer that reports schedules declared in a
// zone other than UTC.
package zone

import (
	"fmt"
	"go/token"
	"strings"
	"time"

	"golang.org/x/tools/go/analysis"

	"github.com/belfry/belfry/analyzer/internal/cronpass"
	"github.com/belfry/belfry/registry"
)

const doc = `report schedules in a zone other than UTC

A schedule in a local zone moves with daylight saving time and with every
change of the zone's law, so the gap between runs is not what the
expression reads. The advice is to schedule in UTC and convert for display.
The report is at the tz= value.

It is stronger for a fixed-time schedule whose wall time falls into a
daylight-saving gap (the time does not exist: the run moves to the end of
the gap) or fold (the time happens twice: it runs once, at the first),
naming the next date that happens within three years of -now. Wildcard
schedules ("0 * * * *") follow the clock through transitions by design and
get only the advice. For @every schedules tz= changes nothing: their slots
are whole multiples of the period since the Unix epoch.`

// Analyzer is the zone check.
var Analyzer = &analysis.Analyzer{
	Name:     "zone",
	Doc:      doc,
	URL:      "https://github.com/belfry/belfry/tree/main/analyzer/zone",
	Requires: []*analysis.Analyzer{cronpass.Analyzer},
	Run:      run,
}

var nowFlag string

func init() {
	Analyzer.Flags.StringVar(&nowFlag, "now", "", "RFC3339 instant to look for DST transitions from (default: the current time)")
}

const scanYears = 3

func run(pass *analysis.Pass) (any, error) {
	now := time.Now()
	if nowFlag != "" {
		var err error
		if now, err = time.Parse(time.RFC3339, nowFlag); err != nil {
			return nil, fmt.Errorf("-now: want an RFC3339 instant such as 2026-01-01T00:00:00Z: %v", err)
		}
	}
	for _, e := range cronpass.Of(pass).Schedules {
		kv, ok := e.Directive.Key("tz")
		if !ok {
			continue
		}
		c := e.Directive.Cron
		transitions := registry.Transitions(c.Location(), now, now.AddDate(scanYears, 0, 0))
		if _, offset := now.In(c.Location()).Zone(); offset == 0 && len(transitions) == 0 {
			continue // UTC by another name
		}
		msg := fmt.Sprintf("schedule %q runs in %s; schedule in UTC and convert for display: a local zone shifts with daylight saving time and with the law, so the gap between runs is not what the expression reads", e.Name, kv.Value)
		switch {
		case c.Every() > 0:
			msg = fmt.Sprintf("tz=%s has no effect on %q: @every slots are whole multiples of the period since the Unix epoch; drop tz=", kv.Value, e.Directive.Expr)
		case !c.Wildcard():
			if s := dstTraps(e.Directive, transitions); s != "" {
				msg = fmt.Sprintf("schedule %q %s; schedule in UTC (tz=UTC) and convert for display", e.Name, s)
			}
		}
		cronpass.Report(pass, e, analysis.Diagnostic{
			Pos: kv.ValuePos, End: kv.ValuePos + token.Pos(len(kv.Value)), Message: msg,
		})
	}
	return nil, nil
}

// dstTraps describes the first gap and the first fold that the schedule's
// wall times fall into, or returns "".
func dstTraps(d *registry.Directive, transitions []registry.Transition) string {
	// The expression evaluated in UTC yields its wall times: the clock
	// readings it matches, whatever the zone makes of them.
	wall := d.Cron.In(time.UTC)
	loc := d.Cron.Location()
	var gap, fold string
	var parts []string
	for _, tr := range transitions {
		lo := tr.At.Add(time.Duration(min(tr.Before, tr.After)) * time.Second)
		hi := tr.At.Add(time.Duration(max(tr.Before, tr.After)) * time.Second)
		w := wall.AtOrAfter(lo)
		if w.IsZero() || !w.Before(hi) {
			continue
		}
		clockFrom := time.Unix(tr.At.Unix()+int64(tr.Before), 0).UTC().Format("15:04")
		clockTo := time.Unix(tr.At.Unix()+int64(tr.After), 0).UTC().Format("15:04")
		switch {
		case tr.Gap() && gap == "":
			runs := d.Cron.AtOrAfter(tr.At)
			gap = fmt.Sprintf("%s does not exist on %s (clocks go forward from %s to %s), so it runs at %s instead",
				clock(w), w.Format("2006-01-02"), clockFrom, clockTo, runs.In(loc).Format("15:04 MST"))
			parts = append(parts, gap)
		case !tr.Gap() && fold == "":
			fold = fmt.Sprintf("%s happens twice on %s (clocks go back from %s to %s), so it runs once, at the first",
				clock(w), w.Format("2006-01-02"), clockFrom, clockTo)
			parts = append(parts, fold)
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf("runs at wall times in %s that daylight saving time breaks: %s", loc, strings.Join(parts, "; "))
}

func clock(t time.Time) string {
	if t.Second() != 0 {
		return t.Format("15:04:05")
	}
	return t.Format("15:04")
}
