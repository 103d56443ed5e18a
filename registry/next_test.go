package registry

import (
	"strings"
	"testing"
	"time"
)

// TestNextDesignExamples reproduces the DST examples of docs/cron-syntax.md
// and the registry package doc.
func TestNextDesignExamples(t *testing.T) {
	tests := []struct {
		expr, zone, from string
		want             []string
	}{
		{"30 2 * * *", "America/New_York", "2026-03-07T12:00:00-05:00", []string{"2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00", "2026-03-10T02:30:00-04:00"}},
		{"30 1 * * *", "America/New_York", "2026-10-31T12:00:00-04:00", []string{"2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00", "2026-11-03T01:30:00-05:00"}},
		{"0 * * * *", "America/New_York", "2026-11-01T00:30:00-04:00", []string{"2026-11-01T01:00:00-04:00", "2026-11-01T01:00:00-05:00", "2026-11-01T02:00:00-05:00"}},
		{"0 0 */2 * MON", "UTC", "2026-01-01T00:00:00Z", []string{"2026-01-05T00:00:00Z", "2026-01-19T00:00:00Z", "2026-02-09T00:00:00Z"}},
		{"0 0 29 2 *", "UTC", "2026-01-01T00:00:00Z", []string{"2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z", "2036-02-29T00:00:00Z"}},
		{"0 0 * * *", "Asia/Beirut", "2027-03-27T12:00:00+02:00", []string{"2027-03-28T01:00:00+03:00", "2027-03-29T00:00:00+03:00", "2027-03-30T00:00:00+03:00"}},
		{"0,30 2 * * *", "Australia/Lord_Howe", "2026-10-03T12:00:00+10:30", []string{"2026-10-04T02:30:00+11:00", "2026-10-05T02:00:00+11:00", "2026-10-05T02:30:00+11:00"}},
		{"*/30 * * * *", "Australia/Lord_Howe", "2026-04-05T01:00:00+11:00", []string{"2026-04-05T01:30:00+11:00", "2026-04-05T01:30:00+10:30", "2026-04-05T02:00:00+10:30"}},
		{"0 12 * * 7", "UTC", "2026-11-28T00:00:00Z", []string{"2026-11-29T12:00:00Z", "2026-12-06T12:00:00Z", "2026-12-13T12:00:00Z"}},
		{"@every 90s", "UTC", "2026-11-28T00:00:00Z", []string{"2026-11-28T00:01:30Z", "2026-11-28T00:03:00Z", "2026-11-28T00:04:30Z"}},
	}
	for _, tt := range tests {
		t.Run(tt.expr+" "+tt.zone, func(t *testing.T) {
			loc, err := LoadZone(tt.zone)
			if err != nil {
				t.Fatal(err)
			}
			c, err := ParseCron(tt.expr, loc)
			if err != nil {
				t.Fatal(err)
			}
			from, err := time.Parse(time.RFC3339, tt.from)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for range tt.want {
				from = c.Next(from)
				got = append(got, from.Format(time.RFC3339))
			}
			if strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Errorf("got  %v\nwant %v", got, tt.want)
			}
		})
	}
}

// TestNextDoesNotAllocate pins what the America/New_York±1h cases of
// BenchmarkNext measure:
// Next allocates nothing, within an hour of a DST transition too, where it
// once walked wall seconds one at a time and allocated at each.
func TestNextDoesNotAllocate(t *testing.T) {
	ny, err := LoadZone("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	froms := []time.Time{
		time.Date(2026, 3, 8, 1, 30, 0, 0, ny), time.Date(2026, 3, 8, 1, 59, 59, 0, ny),
		time.Date(2026, 11, 1, 0, 45, 0, 0, ny), time.Date(2026, 11, 1, 1, 30, 0, 0, ny),
		time.Date(2026, 11, 1, 1, 30, 0, 0, ny).Add(time.Hour), time.Date(2026, 6, 1, 12, 0, 0, 0, ny),
	}
	for _, expr := range []string{"* * * * * *", "*/7 * * * * *", "*/5 * * * *", "30 1 * * *", "30 2 * * *", "0 0 L * *"} {
		c := MustParseCron(expr, ny)
		for _, from := range froms {
			if n := testing.AllocsPerRun(20, func() { c.Next(from) }); n != 0 {
				t.Errorf("%q: Next(%s) allocates %.0f times, want 0", expr, from.Format(time.RFC3339), n)
			}
		}
	}
}
