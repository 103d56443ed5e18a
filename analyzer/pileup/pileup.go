// Package pileup defines an Analyzer that reports schedules of a package
// that fire in the same minute.
package pileup

import (
	"fmt"
	"go/token"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/tools/go/analysis"

	"github.com/belfry/belfry/analyzer/internal/cronpass"
	"github.com/belfry/belfry/registry"
)

const doc = `report schedules that pile up in the same minute

Schedules that fire in the same minute compete for the same workers,
database and downstream services; midnight UTC and the top of every hour
are already crowded by everyone else's cron. pileup
compares the fire times of a package's schedules as UTC instants over one
sample year (366 days from 2026-01-01T00:00:00Z, so the output never depends
on the day it runs): a London and a UTC midnight collide in winter only.
When -threshold or more schedules fire in one minute, each of them is
reported at its expression, naming the others and suggesting a minute
derived from the schedule's name (as Jenkins' H does), so that spreading
is stable; the fix rewrites the minute field (or a descriptor such as
@daily) to it.

Schedules that ever fire twice within an hour ("*/5 * * * *",
"0,30 9 * * *", "@every 10m") are left out: they would collide with
everything, and spreading one minute would not help.`

// Analyzer is the pileup check.
var Analyzer = &analysis.Analyzer{
	Name:     "pileup",
	Doc:      doc,
	URL:      "https://github.com/belfry/belfry/tree/main/analyzer/pileup",
	Requires: []*analysis.Analyzer{cronpass.Analyzer},
	Run:      run,
}

var threshold int

func init() {
	Analyzer.Flags.IntVar(&threshold, "threshold", 3, "report when this many schedules fire in the same minute")
}

const sampleDays = 366

// maxFires bounds the work per schedule; an hourly schedule fires 8,784
// times in a leap year, plus the repeated hour of each fall-back.
const maxFires = 24*sampleDays + 100

type schedule struct {
	entry *cronpass.Entry
	// with holds the other schedules this one shares a crowded minute with;
	// first is the earliest such minute and times how many there are.
	with  map[int]bool
	first time.Time
	times int
}

func run(pass *analysis.Pass) (any, error) {
	var scheds []*schedule
	byMinute := map[int64][]int{}
	for _, e := range cronpass.Of(pass).Schedules {
		if atMostHourly(e.Directive.Cron) {
			i := len(scheds)
			scheds = append(scheds, &schedule{entry: e, with: map[int]bool{}})
			for _, t := range cronpass.Fires(e.Directive.Cron, sampleDays, maxFires) {
				m := t.Unix() / 60
				byMinute[m] = append(byMinute[m], i)
			}
		}
	}
	minutes := make([]int64, 0, len(byMinute))
	for m, idx := range byMinute {
		if len(idx) >= max(threshold, 2) {
			minutes = append(minutes, m)
		}
	}
	slices.Sort(minutes)
	for _, m := range minutes {
		idx := byMinute[m]
		for _, i := range idx {
			s := scheds[i]
			if s.times == 0 {
				s.first = time.Unix(m*60, 0).UTC()
			}
			s.times++
			for _, j := range idx {
				if j != i {
					s.with[j] = true
				}
			}
		}
	}
	for _, s := range scheds {
		if s.times > 0 {
			report(pass, s, scheds)
		}
	}
	return nil, nil
}

// atMostHourly reports whether c never fires twice within an hour.
func atMostHourly(c *registry.Cron) bool {
	if every := c.Every(); every > 0 {
		return every >= time.Hour
	}
	// Two days show the daily pattern cheaply; the year catches the rest.
	for _, days := range []int{2, sampleDays} {
		if gap, _, ok := cronpass.ShortestGap(cronpass.Fires(c, days, maxFires)); ok && gap < time.Hour {
			return false
		}
	}
	return true
}

func report(pass *analysis.Pass, s *schedule, scheds []*schedule) {
	var others []string
	for j := range s.with {
		others = append(others, strconv.Quote(scheds[j].entry.Name))
	}
	slices.Sort(others)
	when := s.first.Format("15:04") + " UTC"
	switch {
	case s.first.Hour() == 0 && s.first.Minute() == 0:
		when += ", midnight, when backups, log rotation and everyone else's cron run too"
	case s.first.Minute() == 0:
		when += ", the top of the hour, when everyone else's cron runs too"
	}
	e := s.entry
	msg := fmt.Sprintf("schedule %q fires in the same minute as %s (%s; first on %s, %d times in the sample year)",
		e.Name, join(others), when, s.first.Format("2006-01-02"), s.times)
	d := analysis.Diagnostic{Pos: e.Directive.ExprPos, End: e.Directive.ExprPos + token.Pos(len(e.Directive.Expr)+2)}
	if expr, minute, edit, ok := spread(e); ok {
		msg += fmt.Sprintf("; spread the load: %q uses minute %d, derived from the name", expr, minute)
		d.SuggestedFixes = []analysis.SuggestedFix{{Message: fmt.Sprintf("Move to minute %d", minute), TextEdits: []analysis.TextEdit{edit}}}
	} else {
		msg += "; move some of them to other minutes"
	}
	d.Message = msg
	cronpass.Report(pass, e, d)
}

func join(names []string) string {
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// SpreadMinute is the minute, 1 to 59, that a schedule called name is
// moved to: a hash of the name, so that it is stable across runs and
// different schedules land on different minutes. Minute 0 is avoided: it
// is the crowded one.
func SpreadMinute(name string) int {
	h := fnv.New32a()
	h.Write([]byte(name))
	return int(h.Sum32()%59) + 1
}

// spread returns the expression with its minute field set to the spread
// minute, and the edit that writes it, when the minute is a single number
// written in the source without escapes.
func spread(e *cronpass.Entry) (expr string, minute int, edit analysis.TextEdit, ok bool) {
	d, c := e.Directive, e.Comment
	off := int(d.ExprPos-c.Slash) + 1
	if off+len(d.Expr) > len(c.Text) || c.Text[off:off+len(d.Expr)] != d.Expr {
		return "", 0, analysis.TextEdit{}, false
	}
	fields := strings.Fields(d.Expr)
	if expanded, ok := registry.ExpandDescriptor(d.Expr); ok {
		fields = strings.Fields(expanded)
	}
	m := 0
	if len(fields) == 6 {
		m = 1
	}
	if len(fields) < 5 {
		return "", 0, analysis.TextEdit{}, false
	}
	current, err := strconv.Atoi(fields[m])
	if err != nil {
		return "", 0, analysis.TextEdit{}, false
	}
	minute = SpreadMinute(e.Name)
	if minute == current {
		minute = minute%59 + 1
	}
	fields[m] = strconv.Itoa(minute)
	expr = strings.Join(fields, " ")
	pos := d.ExprPos + 1
	return expr, minute, analysis.TextEdit{Pos: pos, End: pos + token.Pos(len(d.Expr)), NewText: []byte(expr)}, true
}
