package pileup

import (
	"cmp"
	_ "embed"
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

//go:embed doc.go
var doc string

// Analyzer is the pileup check.
var Analyzer = &analysis.Analyzer{
	Name:     "pileup",
	Doc:      cronpass.MustDoc(doc, "pileup"),
	URL:      "https://github.com/belfry/belfry/tree/main/analyzer/pileup",
	Requires: []*analysis.Analyzer{cronpass.Analyzer},
	Run:      run,
}

var threshold int

func init() {
	Analyzer.Flags.IntVar(&threshold, "threshold", 3, "report when this many schedules fire in the same minute")
}

// namesShown bounds how many colliding schedules a message names.
const namesShown = 3

type schedule struct {
	entry   *cronpass.Entry
	ignored bool
	fix     *analysis.SuggestedFix
	spread  string // the expression the fix writes
	fires   int    // in the sample year
	order   int    // in source order
	class   *class
	moved   bool
}

// class is the schedules that fire at the same instants, and the minutes
// (since cronpass.Reference) they fire in.
type class struct {
	id      int
	members []*schedule
	minutes []int32
	// crowdedInYear is how many of minutes are crowded and fall in the
	// calendar year the sample window starts with: the window is a day
	// longer than 2026, so a daily schedule fires in it 366 times.
	crowdedInYear int
}

func run(pass *analysis.Pass) (any, error) {
	res := cronpass.Of(pass)
	limit := max(threshold, 2)
	classes, byKey := []*class{}, map[string]*class{}
	for i, e := range res.Schedules {
		if g := res.Gap(e); g.OK && g.Len < time.Hour {
			continue
		}
		s := &schedule{entry: e, order: i, ignored: cronpass.Ignored(pass, e)}
		if expr, minute, edit, ok := spread(e); ok {
			s.spread = expr
			s.fix = &analysis.SuggestedFix{Message: fmt.Sprintf("Move to minute %d", minute), TextEdits: []analysis.TextEdit{edit}}
		}
		key := cronpass.FireKey(e)
		c := byKey[key]
		if c == nil {
			c = &class{id: len(classes), minutes: fireMinutes(e.Directive.Cron)}
			byKey[key] = c
			classes = append(classes, c)
		}
		s.fires, s.class = len(c.minutes), c
		c.members = append(c.members, s)
	}

	counts := make([]int32, cronpass.SampleDays*24*60)
	for _, c := range classes {
		for _, m := range c.minutes {
			counts[m] += int32(len(c.members))
		}
	}
	// The classes of each crowded minute, as lists threaded through one
	// slice: first[m] is the newest entry of minute m, plus one.
	type entry struct {
		class *class
		next  int32
	}
	var entries []entry
	first := make([]int32, len(counts))
	yearEnd := int32(cronpass.Reference.AddDate(1, 0, 0).Sub(cronpass.Reference) / time.Minute)
	for _, c := range classes {
		for _, m := range c.minutes {
			if counts[m] >= int32(limit) {
				entries = append(entries, entry{c, first[m]})
				first[m] = int32(len(entries))
				if m < yearEnd {
					c.crowdedInYear++
				}
			}
		}
	}

	// Moving a schedule only ever empties minutes, so a minute whose
	// classes were all seen together in a minute already settled is
	// settled too: a daily crowd is sorted out once, not 366 times.
	settled := map[string]bool{}
	var cs []*class
	for m, head := range first {
		if head == 0 {
			continue
		}
		cs = cs[:0]
		for i := head; i != 0; i = entries[i-1].next {
			cs = append(cs, entries[i-1].class)
		}
		sig := signature(cs)
		if settled[sig] {
			continue
		}
		var here []*schedule
		for _, c := range cs {
			for _, s := range c.members {
				if !s.moved {
					here = append(here, s)
				}
			}
		}
		if len(here) >= limit {
			slices.SortFunc(here, keepFirst)
			names := sortedNames(here)
			for _, s := range here[limit-1:] {
				s.moved = true
				report(pass, s, int32(m), names, s.class.crowdedInYear)
			}
		}
		settled[sig] = true
	}
	return nil, nil
}

// fireMinutes returns the minutes, counted from cronpass.Reference, in
// which c fires during the sample year.
func fireMinutes(c *registry.Cron) []int32 {
	var out []int32
	cronpass.Walk(c, cronpass.SampleDays, func(t time.Time) bool {
		m := int32(t.Sub(cronpass.Reference) / time.Minute)
		if n := len(out); n == 0 || out[n-1] != m {
			out = append(out, m)
		}
		return true
	})
	return out
}

func signature(cs []*class) string {
	b := make([]byte, 0, 8*len(cs))
	for _, c := range cs {
		b = strconv.AppendInt(b, int64(c.id), 36)
		b = append(b, ',')
	}
	return string(b)
}

// keepFirst orders the schedules of a crowded minute by how much reason
// there is to leave them where they are.
func keepFirst(a, b *schedule) int {
	if a.ignored != b.ignored {
		if a.ignored {
			return -1
		}
		return 1
	}
	if (a.fix == nil) != (b.fix == nil) {
		if a.fix == nil {
			return -1
		}
		return 1
	}
	return cmp.Or(cmp.Compare(b.fires, a.fires), cmp.Compare(a.order, b.order))
}

func sortedNames(here []*schedule) []string {
	names := make([]string, len(here))
	for i, s := range here {
		names[i] = s.entry.Name
	}
	slices.Sort(names)
	return names
}

// report reports s, which is crowded at minute, and in times minutes of
// the year the sample window starts with.
func report(pass *analysis.Pass, s *schedule, minute int32, names []string, times int) {
	at := cronpass.Reference.Add(time.Duration(minute) * time.Minute)
	when := at.Format("15:04") + " UTC"
	switch {
	case at.Hour() == 0 && at.Minute() == 0:
		when += ", midnight,"
	case at.Minute() == 0:
		when += ", the top of the hour,"
	}
	e := s.entry
	msg := fmt.Sprintf("schedule %q fires at %s with %s (%s, first %s); ",
		e.Name, when, others(names, e.Name), howOften(times, cronpass.Reference.Year()), at.Format("2006-01-02"))
	d := analysis.Diagnostic{Pos: e.Directive.ExprPos, End: e.Directive.ExprPos + token.Pos(len(e.Directive.Expr)+2)}
	if s.fix != nil {
		msg += fmt.Sprintf("move it to %q", s.spread)
		d.SuggestedFixes = []analysis.SuggestedFix{*s.fix}
	} else {
		msg += "move it to another minute"
	}
	d.Message = msg
	cronpass.Report(pass, e, d)
}

// howOften says how many times a schedule meets the crowd in year. A
// crowd first met in the window's extra day is not in year at all.
func howOften(times, year int) string {
	switch times {
	case 0:
		return fmt.Sprintf("not in %d", year)
	case 1:
		return fmt.Sprintf("once in %d", year)
	}
	return fmt.Sprintf("%d times in %d", times, year)
}

// others names a few of the schedules in names (which holds self), and
// how many more there are, in at most about 130 bytes. It looks at a few
// names only, so a crowd of thousands costs no more than a crowd of four.
func others(names []string, self string) string {
	var shown []string
	size := 0
	for _, n := range names {
		if n == self {
			continue
		}
		q := strconv.Quote(abbreviate(n))
		if len(shown) == namesShown || size+len(q) > 120 {
			break
		}
		shown = append(shown, q)
		size += len(q)
	}
	rest := len(names) - 1 - len(shown)
	switch {
	case rest > 0:
		return strings.Join(shown, ", ") + fmt.Sprintf(" and %d more", rest)
	case len(shown) == 1:
		return shown[0]
	}
	return strings.Join(shown[:len(shown)-1], ", ") + " and " + shown[len(shown)-1]
}

// abbreviate shortens a long name to its start and its end, which is
// where generated names (nightly-export-…-team-017) differ.
func abbreviate(name string) string {
	const head, tail = 14, 12
	if len(name) <= head+tail+2 {
		return name
	}
	return name[:head] + "…" + name[len(name)-tail:]
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
