package registry

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// nextN returns the next n fire times after from, formatted RFC 3339.
func nextN(c *Cron, from time.Time, n int) []string {
	var out []string
	for range n {
		from = c.Next(from)
		out = append(out, from.Format(time.RFC3339))
	}
	return out
}

var year2026 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestParseCronSameSchedule(t *testing.T) {
	t.Parallel()
	// Each pair must fire at the same instants.
	tests := []struct{ expr, same string }{
		{"0 12 * * 7", "0 12 * * 0"},
		{"0 12 * * 7", "0 12 * * SUN"},
		{"0 12 * * 5-7", "0 12 * * FRI,SAT,SUN"},
		{"0 12 * * 0-7", "0 12 * * *"},
		{"0 12 * * 1-7/2", "0 12 * * MON,WED,FRI,SUN"},
		{"0 12 * * 7/3", "0 12 * * 0"},
		{"0 12 * * 07", "0 12 * * 0"},
		{"0 12 * * mon-fri", "0 12 * * 1-5"},
		{"0 0 1 jan-mar/2 *", "0 0 1 1,3 *"},
		{"0 0 ? * ?", "0 0 * * *"},
		{"@yearly", "0 0 1 1 *"},
		{"@annually", "0 0 1 1 *"},
		{"@monthly", "0 0 1 * *"},
		{"@weekly", "0 0 * * 0"},
		{"@daily", "0 0 * * *"},
		{"@midnight", "0 0 * * *"},
		{"@hourly", "0 * * * *"},
		{"  @daily\t", "0 0 * * *"},
		{"0 17 3 * * *", "17 3 * * *"},
		{"0  17\t3 * * *", "17 3 * * *"},
	}
	for _, tt := range tests {
		a, b := checkSameSchedule(t, tt.expr, tt.same)
		if a == nil {
			continue
		}
		if a.Wildcard() != b.Wildcard() {
			t.Errorf("%q: Wildcard() = %v, %q: %v", tt.expr, a.Wildcard(), tt.same, b.Wildcard())
		}
		if a.Expr() != tt.expr {
			t.Errorf("Expr() = %q, want %q as written", a.Expr(), tt.expr)
		}
	}
}

// checkSameSchedule asserts that expr parses and fires at the same 20
// instants as same, and returns both parsed (a nil a when expr fails).
func checkSameSchedule(t *testing.T, expr, same string) (a, b *Cron) {
	t.Helper()
	a, err := ParseCron(expr, time.UTC)
	if err != nil {
		t.Errorf("ParseCron(%q): %v", expr, err)
		return nil, nil
	}
	b = MustParseCron(same, time.UTC)
	if got, want := nextN(a, year2026, 20), nextN(b, year2026, 20); !slices.Equal(got, want) {
		t.Errorf("%q fires at %v...,\nwant the same as %q: %v...", expr, got[:3], same, want[:3])
	}
	return a, b
}

func TestParseCronWildcard(t *testing.T) {
	t.Parallel()
	tests := []struct {
		expr     string
		wildcard bool
	}{
		{"17 3 * * *", false}, {"0 0,12 * * *", false}, {"0 9-17 * * *", false},
		{"* 3 * * *", true}, {"*/15 3 * * *", true}, {"0 * * * *", true}, {"0 */2 * * *", true},
		{"@hourly", true}, {"@daily", false}, {"@every 1h", true}, {"* 0 3 * * *", false},
	}
	for _, tt := range tests {
		if got := MustParseCron(tt.expr, time.UTC).Wildcard(); got != tt.wildcard {
			t.Errorf("%q: Wildcard() = %v, want %v", tt.expr, got, tt.wildcard)
		}
	}
}

func TestParseCronEvery(t *testing.T) {
	t.Parallel()
	ny, err := LoadZone("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		expr   string
		period time.Duration
	}{
		{"@every 1s", time.Second}, {"@every 90s", 90 * time.Second}, {"@every 7m", 7 * time.Minute},
		{"@every 1h30m", 90 * time.Minute}, {"@every 25h", 25 * time.Hour},
	}
	froms := []time.Time{year2026, time.Date(2026, 3, 8, 1, 59, 59, 999, ny), time.Date(1969, 12, 31, 23, 59, 0, 0, time.UTC), time.Unix(123457, 5)}
	for _, tt := range tests {
		for _, loc := range []*time.Location{time.UTC, ny} {
			c := MustParseCron(tt.expr, loc)
			if c.Every() != tt.period {
				t.Errorf("%q: Every() = %s, want %s", tt.expr, c.Every(), tt.period)
			}
			// Slots are whole multiples of the period since the epoch, in
			// any zone, so that every replica computes the same ones.
			for _, from := range froms {
				got := c.Next(from)
				step := int64(tt.period / time.Second)
				if got.Unix()%step != 0 || !got.After(from) || got.Add(-tt.period).After(from) || got.Location() != loc {
					t.Errorf("%q in %s: Next(%s) = %s, want the first multiple of %s since the epoch after it", tt.expr, loc, from, got, tt.period)
				}
			}
		}
	}
}

func TestParseCronErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		expr        string
		offset, len int
		msgHas      []string
	}{
		{"", 0, 0, []string{"empty cron expression", ExprExample}},
		{"   ", 0, 3, []string{"empty cron expression"}},
		{"17 25 * * *", 3, 2, []string{`hour field "25"`, ExprExample}},
		{"  17 3 * * MON-FRY", 11, 7, []string{`day-of-week field "MON-FRY"`}},
		{"60 17 3 * * *", 0, 2, []string{`second field "60"`}},
		{"0 0 * * 8", 8, 1, []string{`day-of-week field "8"`, "above the maximum 7", "0 and 7 are Sunday"}},
		{"0 0 * * 7-8", 8, 3, []string{`day-of-week field "7-8"`}},
		{"H 0 * * *", 0, 1, []string{"H picks a value from the schedule's name", "name=nightly-report"}},
		{"0 0 * * 7/9223372036854775807", 8, 21, []string{"step 9223372036854775807 is larger than the day-of-week range 0-6"}},
		{"*/0 * * * *", 0, 3, []string{`minute field "*/0"`}},
		{"17 3 * *", 0, 8, []string{"has 4 fields", ExprExample}},
		{"0 17 3 * * * *", 0, 14, []string{"has 7 fields"}},
		{"0 0 30 2 *", 4, 2, []string{"never fires", `"0 0 28 2 *"`}},
		{"0 0 30,31 2 *", 4, 5, []string{"never fires"}},
		{"0 0 31 4,6,9,11 *", 4, 2, []string{"never fires"}},
		{"0 0 31 2 */2", 4, 2, []string{"never fires"}},
		{"CRON_TZ=Europe/Berlin 0 0 * * *", 0, 21, []string{"use the key tz=Europe/Berlin"}},
		{" TZ=UTC 0 0 * * *", 1, 6, []string{"use the key tz=UTC"}},
		{"@reboot", 0, 7, []string{`unknown descriptor "@reboot"`, "@daily"}},
		{"@daily 0", 0, 8, []string{"unknown descriptor"}},
		{"@every", 0, 6, []string{"@every needs a duration", `"@every 15m"`}},
		{"@everyday", 0, 9, []string{"@every needs a duration"}},
		{"@every soon", 7, 4, []string{`"soon" is not a duration`, `"@every 15m"`}},
		{"@every 500ms", 7, 5, []string{"whole number of seconds", `"@every 90s"`}},
		{"@every 1.5s", 7, 4, []string{"whole number of seconds"}},
		{"@every -1m", 7, 3, []string{"whole number of seconds"}},
		// The message quotes the field as written, not as rewritten for
		// Sunday-as-7.
		{"0 0 * * 7/99999999999999999999", 8, 22, []string{`day-of-week field "7/99999999999999999999"`}},
	}
	for _, tt := range tests {
		c, err := ParseCron(tt.expr, time.UTC)
		var ee *ExprError
		if !errors.As(err, &ee) {
			t.Errorf("ParseCron(%q) = %v, %v; want an *ExprError", tt.expr, c, err)
			continue
		}
		if c != nil {
			t.Errorf("ParseCron(%q) returned a schedule with its error", tt.expr)
		}
		if ee.Offset != tt.offset || ee.Len != tt.len {
			t.Errorf("ParseCron(%q): error at offset %d len %d, want %d len %d: %s", tt.expr, ee.Offset, ee.Len, tt.offset, tt.len, ee.Msg)
		}
		for _, want := range tt.msgHas {
			if !strings.Contains(ee.Msg, want) {
				t.Errorf("ParseCron(%q): message %q does not contain %q", tt.expr, ee.Msg, want)
			}
		}
	}
}

func TestParseCronAccepts(t *testing.T) {
	t.Parallel()
	// Day combinations that look impossible but fire: 29 February in leap
	// years, and a restricted day of week ORed with an impossible date.
	for _, expr := range []string{"0 0 29 2 *", "0 0 31 2 MON", "0 0 30 2 1-5", "0 0 */30 2 *", "0 0 * * 7/7"} {
		c, err := ParseCron(expr, time.UTC)
		if err != nil {
			t.Errorf("ParseCron(%q): %v", expr, err)
			continue
		}
		if c.Next(year2026).IsZero() {
			t.Errorf("%q never fires", expr)
		}
	}
}

func TestNextNoFireTimeWithinHorizon(t *testing.T) {
	t.Parallel()
	// In New York the second Sunday of March has no 2 a.m. hour, and a
	// wildcard schedule does not fire in a gap.
	ny, err := LoadZone("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	c := MustParseCron("*/10 2 8-14 3 */7", ny)
	if got := c.Next(year2026); !got.IsZero() {
		t.Errorf("Next = %s, want the zero Time", got)
	}
	// The same wall times exist in UTC.
	if got := MustParseCron("*/10 2 8-14 3 */7", time.UTC).Next(year2026); got.Format(time.RFC3339) != "2026-03-08T02:00:00Z" {
		t.Errorf("in UTC Next = %s, want 2026-03-08T02:00:00Z", got)
	}
}

func TestNextStrictlyAfterSubSecond(t *testing.T) {
	t.Parallel()
	c := MustParseCron("*/10 * * * * *", time.UTC)
	at := time.Date(2026, 5, 1, 12, 0, 10, 0, time.UTC)
	tests := []struct {
		from time.Time
		want time.Time
	}{
		{at.Add(-time.Nanosecond), at},
		{at, at.Add(10 * time.Second)},
		{at.Add(time.Nanosecond), at.Add(10 * time.Second)},
		{at.Add(9*time.Second + 999999999), at.Add(10 * time.Second)},
	}
	for _, tt := range tests {
		if got := c.Next(tt.from); !got.Equal(tt.want) {
			t.Errorf("Next(%s) = %s, want %s", tt.from.Format(time.RFC3339Nano), got, tt.want)
		}
	}
}

func TestExpandDescriptor(t *testing.T) {
	for expr, want := range map[string]string{"@daily": "0 0 * * *", "@hourly": "0 * * * *", "@yearly": "0 0 1 1 *"} {
		if got, ok := ExpandDescriptor(expr); !ok || got != want {
			t.Errorf("ExpandDescriptor(%q) = %q, %v; want %q", expr, got, ok, want)
		}
	}
	for _, expr := range []string{"@every 1h", "0 0 * * *", "@nightly"} {
		if got, ok := ExpandDescriptor(expr); ok {
			t.Errorf("ExpandDescriptor(%q) = %q, want no expansion", expr, got)
		}
	}
}
