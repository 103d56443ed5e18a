package registry

import (
	"testing"
	"time"
)

func TestTransitions(t *testing.T) {
	ny, _ := LoadZone("America/New_York")
	lordHowe, _ := LoadZone("Australia/Lord_Howe")
	for _, tt := range []struct {
		loc      *time.Location
		from, to string
		want     []Transition
	}{
		{ny, "2026-01-01T00:00:00Z", "2027-01-01T00:00:00Z", []Transition{
			{At: mustTimeT("2026-03-08T07:00:00Z"), Before: -5 * 3600, After: -4 * 3600},
			{At: mustTimeT("2026-11-01T06:00:00Z"), Before: -4 * 3600, After: -5 * 3600},
		}},
		// Across the last day of 2040, where Go's ZoneBounds misreports the
		// period's end; the walk must go on to 2041's transitions.
		{ny, "2040-12-01T00:00:00Z", "2041-04-01T00:00:00Z", []Transition{
			{At: mustTimeT("2041-03-10T07:00:00Z"), Before: -5 * 3600, After: -4 * 3600},
		}},
		{lordHowe, "2026-09-01T00:00:00Z", "2026-11-01T00:00:00Z", []Transition{
			{At: mustTimeT("2026-10-03T15:30:00Z"), Before: 10*3600 + 1800, After: 11 * 3600},
		}},
		{time.UTC, "2026-01-01T00:00:00Z", "2036-01-01T00:00:00Z", nil},
	} {
		got := Transitions(tt.loc, mustTimeT(tt.from), mustTimeT(tt.to))
		if len(got) != len(tt.want) {
			t.Errorf("%s %s..%s: %d transitions %v, want %v", tt.loc, tt.from, tt.to, len(got), got, tt.want)
			continue
		}
		for i := range got {
			if !got[i].At.Equal(tt.want[i].At) || got[i].Before != tt.want[i].Before || got[i].After != tt.want[i].After {
				t.Errorf("%s: transition %d = %v, want %v", tt.loc, i, got[i], tt.want[i])
			}
		}
	}
	if !(Transition{Before: 0, After: 3600}).Gap() || (Transition{Before: 3600, After: 0}).Gap() {
		t.Error("Gap is wrong way round")
	}
}

func mustTimeT(s string) time.Time {
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return v
}
