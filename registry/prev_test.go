package registry

import (
	"testing"
	"time"
)

func TestPrevIsTheNewestFireAtOrBefore(t *testing.T) {
	ny, _ := LoadZone("America/New_York")
	for _, tt := range []struct{ expr, zone, at, want string }{
		{"17 3 * * *", "UTC", "2026-11-29T12:00:00Z", "2026-11-29T03:17:00Z"},
		{"17 3 * * *", "UTC", "2026-11-29T03:17:00Z", "2026-11-29T03:17:00Z"},
		{"17 3 * * *", "UTC", "2026-11-29T03:16:59Z", "2026-11-28T03:17:00Z"},
		{"* * * * * *", "UTC", "2026-11-29T12:00:00.5Z", "2026-11-29T12:00:00Z"},
		{"0 0 29 2 *", "UTC", "2031-01-01T00:00:00Z", "2028-02-29T00:00:00Z"},
		// The fold: the wildcard schedule fired at 01:00 EDT and 01:00 EST.
		{"0 * * * *", "America/New_York", "2026-11-01T06:30:00Z", "2026-11-01T06:00:00Z"},
		// The gap: 02:30 did not exist; the fixed-time schedule fired at 03:00 EDT.
		{"30 2 * * *", "America/New_York", "2026-03-08T08:00:00Z", "2026-03-08T07:00:00Z"},
	} {
		loc := time.UTC
		if tt.zone != "UTC" {
			loc = ny
		}
		c := MustParseCron(tt.expr, loc)
		at, _ := time.Parse(time.RFC3339Nano, tt.at)
		if got := c.Prev(at); !got.Equal(mustTime(t, tt.want)) {
			t.Errorf("Prev(%q, %s) = %s, want %s", tt.expr, tt.at, got.UTC().Format(time.RFC3339), tt.want)
		}
	}
}

func TestAtOrAfterIsTheFirstFireNotBefore(t *testing.T) {
	ny, _ := LoadZone("America/New_York")
	for _, tt := range []struct{ expr, zone, at, want string }{
		{"17 3 * * *", "UTC", "2026-11-29T03:17:00Z", "2026-11-29T03:17:00Z"},
		{"17 3 * * *", "UTC", "2026-11-29T03:17:00.001Z", "2026-11-30T03:17:00Z"},
		{"17 3 * * *", "UTC", "2026-11-29T03:16:59.999Z", "2026-11-29T03:17:00Z"},
		{"* * * * * *", "UTC", "2026-11-29T12:00:00.5Z", "2026-11-29T12:00:01Z"},
		{"0 0 29 2 *", "UTC", "2028-02-29T00:00:00Z", "2028-02-29T00:00:00Z"},
		// The gap: 02:30 does not exist; it runs at 03:00 EDT.
		{"30 2 * * *", "America/New_York", "2026-03-08T07:00:00Z", "2026-03-08T07:00:00Z"},
	} {
		loc := time.UTC
		if tt.zone != "UTC" {
			loc = ny
		}
		c := MustParseCron(tt.expr, loc)
		at, _ := time.Parse(time.RFC3339Nano, tt.at)
		if got := c.AtOrAfter(at); !got.Equal(mustTime(t, tt.want)) {
			t.Errorf("AtOrAfter(%q, %s) = %s, want %s", tt.expr, tt.at, got.UTC().Format(time.RFC3339), tt.want)
		}
	}
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
