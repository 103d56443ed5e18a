package registry

import (
	"cmp"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// robfig's parser computes the values of the standard items; belfry
// validates the items first and rewrites what robfig reads otherwise. The
// tests here check that the two never disagree: every expression belfry
// accepts, robfig parses, and to the values of belfry's own reading of
// each item (handValues), which the field parser once computed itself.

// handValues expands a field's standard items by hand: lo, lo+step, ... up
// to hi, with day-of-week 7 folded onto Sunday = 0.
func handValues(fi int, set fieldSet) uint64 {
	var values uint64
	for _, it := range set.items {
		for v := it.lo; v <= it.hi; v += it.step {
			values |= 1 << v
		}
	}
	if fi == fieldDayOfWeek && values&(1<<7) != 0 {
		values = values&^(1<<7) | 1
	}
	return values
}

// checkStandardValues fails t unless every field of c, which ParseCron made
// of expr with the schedule name name, matches the values of belfry's
// reading of its items.
func checkStandardValues(t testing.TB, expr, name string, c *Cron) {
	t.Helper()
	if c.Every() != 0 {
		return
	}
	text := strings.TrimSpace(expr)
	if fields, ok := ExpandDescriptor(text); ok {
		text = fields
	}
	fields, _ := splitFields(text)
	if len(fields) == 5 {
		fields = append([]string{"0"}, fields...)
	}
	got := [6]uint64{c.second, c.minute, c.hour, c.dom, c.month, c.dow}
	for i, f := range fields {
		set, err := parseField(i, f, &cronConfig{name: name})
		if err != nil {
			t.Fatalf("ParseCron accepts %q, but its %s field %q alone: %s", expr, fieldSpecs[i].name, f, err.msg)
		}
		if want := handValues(i, set); got[i] != want {
			t.Errorf("%q: %s field %q matches %b with robfig's parser given %q, want %b",
				expr, fieldSpecs[i].name, f, got[i], set.robfigText(), want)
		}
	}
}

// TestRobfigValuesMatchBelfrysReading runs checkStandardValues over the fuzz
// seeds and random expressions of every form the oracle generates, and
// checks those values against the oracle's independent ones as well.
func TestRobfigValuesMatchBelfrysReading(t *testing.T) {
	t.Parallel()
	for _, expr := range fuzzExprs {
		if c, err := ParseCron(expr, time.UTC, WithName("jobs.fuzz")); err == nil {
			checkStandardValues(t, expr, "jobs.fuzz", c)
		} else if strings.HasPrefix(err.Error(), robfigRejects) {
			t.Errorf("ParseCron(%q): %v", expr, err)
		}
	}
	g := exprGen{rand.New(rand.NewPCG(*seedFlag, 16))}
	parsed := 0
	for range 20000 {
		e := g.expr()
		text := e.String()
		c, err := ParseCron(text, time.UTC, WithName(e.name))
		if err != nil {
			if strings.HasPrefix(err.Error(), robfigRejects) {
				t.Errorf("ParseCron(%q): %v", text, err)
			}
			continue // "never fires": the differential test checks those
		}
		parsed++
		checkStandardValues(t, text, e.name, c)
		got := [6]uint64{c.second, c.minute, c.hour, c.dom, c.month, c.dow}
		for i := range got {
			var want uint64
			for v, ok := range e.set(i) {
				if ok {
					want |= 1 << v
				}
			}
			if got[i] != want {
				t.Errorf("%q: %s field matches %b, the oracle %b", text, fieldSpecs[i].name, got[i], want)
			}
		}
	}
	if parsed < 15000 {
		t.Errorf("parsed only %d of 20000 random expressions", parsed)
	}
}

// TestRobfigItems pins what robfig's parser is given: the item as written
// where robfig reads it as belfry does, numbers where it would not (Sunday
// as 7, ranges ending on Sunday, full names, H).
func TestRobfigItems(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		field             int
		text, items, name string // name: for H, nightly-report unless set
	}{
		{fieldMinute, "*/15", "*/15", ""},
		{fieldMinute, "0,30", "0,30", ""},
		{fieldMinute, "5-50/05", "5-50/05", ""},
		{fieldHour, "H", "11", ""},
		{fieldMinute, "H/15", "13-59/15", ""},
		{fieldMinute, "H(0-29)", "13", ""},
		{fieldDayOfMonth, "?", "?", ""},
		{fieldDayOfMonth, "L,15", "15", ""},
		{fieldDayOfMonth, "1/10", "1/10", ""},
		{fieldMonth, "jul-Dec", "jul-Dec", ""},
		{fieldMonth, "JANUARY,july-december", "1,7-12", ""},
		{fieldDayOfWeek, "*", "*", ""},
		{fieldDayOfWeek, "MON-FRI", "MON-FRI", ""},
		{fieldDayOfWeek, "MON/2", "MON/2", ""},
		{fieldDayOfWeek, "1/2", "1/2", ""},
		{fieldDayOfWeek, "7", "0", ""},
		{fieldDayOfWeek, "007", "0", ""},
		{fieldDayOfWeek, "7/2", "0", ""},
		{fieldDayOfWeek, "5-7", "5-6,0", ""},
		{fieldDayOfWeek, "MON-SUN", "1-6,0", ""},
		{fieldDayOfWeek, "SAT-SUN", "6,0", ""},
		{fieldDayOfWeek, "FRI-0", "5-6,0", ""},
		{fieldDayOfWeek, "1-7/3", "1-6/3,0", ""},
		{fieldDayOfWeek, "2-7/2", "2-6/2", ""},
		{fieldDayOfWeek, "Friday", "5", ""},
		{fieldDayOfWeek, "0-0", "0-0", ""},
		{fieldDayOfWeek, "5L,MON#2", "", ""},
		{fieldDayOfWeek, "H(FRI-SUN)", "0", "report"},
		{fieldDayOfWeek, "H(FRI-SUN)", "5", "nightly-report"},
		{fieldDayOfWeek, "H(MON-SUN)/2", "1-6/2,0", ""},
	} {
		set, err := parseField(tt.field, tt.text, &cronConfig{name: cmp.Or(tt.name, "nightly-report")})
		if err != nil {
			t.Errorf("%s %q: %s", fieldSpecs[tt.field].name, tt.text, err.msg)
			continue
		}
		if got := set.robfigText(); got != tt.items {
			t.Errorf("%s %q: robfig is given %q, want %q", fieldSpecs[tt.field].name, tt.text, got, tt.items)
		}
	}
}

// TestRobfigRejectionIsABug checks that an item robfig's parser refuses
// after belfry's validation is reported as belfry's bug, not blamed on the
// expression, and that extension-only fields reach robfig as "*".
func TestRobfigRejectionIsABug(t *testing.T) {
	t.Parallel()
	var sets [6]fieldSet
	sets[fieldDayOfWeek].items = []stdItem{{lo: 7, hi: 7, step: 1, robfig: "7"}}
	err := standardValues(&sets)
	if err == nil || !strings.HasPrefix(err.Error(), robfigRejects) || !strings.Contains(err.Error(), `"* * * * * 7"`) || !strings.Contains(err.Error(), "bug in belfry") {
		t.Errorf("standardValues with day-of-week item 7: %v, want %q naming the spec and a bug", err, robfigRejects)
	}
	sets[fieldDayOfWeek].items[0].robfig = "0"
	if err := standardValues(&sets); err != nil {
		t.Fatal(err)
	}
	if sets[fieldDayOfWeek].values != 1 || sets[fieldMinute].values != 0 {
		t.Errorf("values %b, %b: want Sunday only, and none for a field without standard items", sets[fieldDayOfWeek].values, sets[fieldMinute].values)
	}
}
