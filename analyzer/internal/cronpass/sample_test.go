package cronpass

import (
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
)

// TestShortestGapMatchesFullWalk compares the day-skipping walk with the
// plain one, which looks at every fire, across zones with whole-hour,
// half-hour and midnight transitions.
func TestShortestGapMatchesFullWalk(t *testing.T) {
	exprs := []string{
		"17 3 * * *", "30 1,2 * * *", "30 2 * * *", "0 * * * *", "*/15 * * * *",
		"0,30 9 * * *", "0 9,17 * * MON-FRI", "5 0 1,15 * *", "0 0 29 2 *", "*/7 * * * *",
		"0 */5 * * *", "0 0 * * SUN", "0 15 6 * * *", "*/20 */13 1-3 * * *", "59 23 31 * *",
	}
	zones := []string{"UTC", "America/New_York", "Europe/London", "Australia/Lord_Howe", "Asia/Beirut", "Asia/Kolkata"}
	for _, zone := range zones {
		loc, err := registry.LoadZone(zone)
		if err != nil {
			t.Fatal(err)
		}
		for _, expr := range exprs {
			c := registry.MustParseCron(expr, loc)
			want := fullWalkGap(c, SampleDays)
			if got := ShortestGap(c, SampleDays); got != want {
				t.Errorf("ShortestGap(%q in %s) = %v at %v, want %v at %v", expr, zone, got.Len, got.At, want.Len, want.At)
			}
		}
	}
}

func fullWalkGap(c *registry.Cron, days int) Gap {
	var g Gap
	var prev time.Time
	Walk(c, days, func(t time.Time) bool {
		if !prev.IsZero() {
			if d := t.Sub(prev); !g.OK || d < g.Len {
				g = Gap{Len: d, At: prev, OK: true}
			}
		}
		prev = t
		return true
	})
	return g
}

// countingCron counts the fire times a walk asks for.
type countingCron struct {
	*registry.Cron
	calls int
}

func (c *countingCron) Next(t time.Time) time.Time { c.calls++; return c.Cron.Next(t) }

// TestShortestGapIsBounded checks that frequent schedules cost a few days
// of walking, not every fire of their year.
func TestShortestGapIsBounded(t *testing.T) {
	for _, tc := range []struct {
		expr, zone string
		gap        time.Duration
	}{
		{"*/7 * * * * *", "America/New_York", 4 * time.Second}, // 4.5 million fires a year
		{"*/5 * * * *", "Europe/London", 5 * time.Minute},      // 105,408
		{"0 * * * *", "UTC", time.Hour},                        // 8,784
	} {
		loc, err := registry.LoadZone(tc.zone)
		if err != nil {
			t.Fatal(err)
		}
		c := &countingCron{Cron: registry.MustParseCron(tc.expr, loc)}
		g := ShortestGap(c, SampleDays)
		if g.Len != tc.gap {
			t.Errorf("%q in %s: gap = %v, want %v", tc.expr, tc.zone, g.Len, tc.gap)
		}
		// One day in full, each transition day and its neighbours in
		// full, one jump per other day.
		perDay := int(24 * time.Hour / tc.gap)
		if limit := 8*perDay + 2*SampleDays; c.calls > limit {
			t.Errorf("%q in %s: %d calls of Next, want at most %d", tc.expr, tc.zone, c.calls, limit)
		}
	}
}
