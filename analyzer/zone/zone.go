package zone

import (
	_ "embed"
	"fmt"
	"go/token"
	"strings"
	"time"

	"golang.org/x/tools/go/analysis"

	"github.com/belfry/belfry/analyzer/internal/cronpass"
	"github.com/belfry/belfry/registry"
)

//go:embed doc.go
var doc string

// Analyzer is the zone check.
var Analyzer = &analysis.Analyzer{
	Name:     "zone",
	Doc:      cronpass.MustDoc(doc, "zone"),
	URL:      "https://github.com/belfry/belfry/tree/main/analyzer/zone",
	Requires: []*analysis.Analyzer{cronpass.Analyzer},
	Run:      run,
}

var nowFlag string

func init() {
	Analyzer.Flags.StringVar(&nowFlag, "now", "", "RFC3339 instant the sample year for DST transitions starts at (default 2026-01-01T00:00:00Z, as pileup and overlap)")
}

func run(pass *analysis.Pass) (any, error) {
	from := cronpass.Reference
	if nowFlag != "" {
		var err error
		if from, err = time.Parse(time.RFC3339, nowFlag); err != nil {
			return nil, fmt.Errorf("-now: want an RFC3339 instant such as 2026-01-01T00:00:00Z: %v", err)
		}
	}
	to := from.AddDate(0, 0, cronpass.SampleDays)
	for _, e := range cronpass.Of(pass).Schedules {
		kv, ok := e.Directive.Key("tz")
		if !ok || e.Directive.Per != "" {
			// A family's tz= is only the default of members that each
			// have their own zone, chosen per member as data.
			continue
		}
		c := e.Directive.Cron
		transitions := registry.Transitions(c.Location(), from, to)
		if _, offset := from.In(c.Location()).Zone(); offset == 0 && len(transitions) == 0 {
			continue // UTC by another name
		}
		msg := fmt.Sprintf("note: %q runs on %s time; to keep a local zone on purpose, add //cronlint:ignore zone <reason>", e.Name, kv.Value)
		switch {
		case c.Every() > 0:
			msg = fmt.Sprintf("tz=%s has no effect on %q: @every slots are multiples of the period since the Unix epoch; drop tz=", kv.Value, e.Directive.Expr)
		case !c.Wildcard():
			if s := dstTrap(e.Directive, transitions); s != "" {
				msg = fmt.Sprintf("%q %s; use tz=UTC or another time", e.Name, s)
			}
		}
		cronpass.Report(pass, e, analysis.Diagnostic{
			Pos: kv.ValuePos, End: kv.ValuePos + token.Pos(len(kv.Value)), Message: msg,
		})
	}
	return nil, nil
}

// dstTrap describes the first gap and the first fold of the window that
// the schedule's wall times fall into, or returns "".
func dstTrap(d *registry.Directive, transitions []registry.Transition) string {
	// The expression evaluated in UTC yields its wall times: the clock
	// readings it matches, whatever the zone makes of them.
	wall := d.Cron.In(time.UTC)
	loc := d.Cron.Location()
	var gap, fold string
	for _, tr := range transitions {
		lo := tr.At.Add(time.Duration(min(tr.Before, tr.After)) * time.Second)
		hi := tr.At.Add(time.Duration(max(tr.Before, tr.After)) * time.Second)
		w := wall.AtOrAfter(lo)
		if w.IsZero() || !w.Before(hi) {
			continue
		}
		switch {
		case tr.Gap() && gap == "":
			runs := d.Cron.AtOrAfter(tr.At)
			gap = fmt.Sprintf("%s does not exist on %s (runs at %s)", clock(w), w.Format("2006-01-02"), runs.In(loc).Format("15:04 MST"))
		case !tr.Gap() && fold == "":
			fold = fmt.Sprintf("%s happens twice on %s (runs once)", clock(w), w.Format("2006-01-02"))
		}
	}
	var parts []string
	for _, p := range []string{gap, fold} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf("hits DST in %s: %s", loc, strings.Join(parts, "; "))
}

func clock(t time.Time) string {
	if t.Second() != 0 {
		return t.Format("15:04:05")
	}
	return t.Format("15:04")
}
