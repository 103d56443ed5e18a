package core

import (
	"reflect"
	"testing"
	"time"
)

// TestLateInstantKeepsWhatStatusesCompare checks that the status index's
// 8-byte moments give back what lateAt gave it: the zero time (not late
// yet), neverLate, and any moment to the nanosecond, with moments past
// what nanoseconds hold read as never.
func TestLateInstantKeepsWhatStatusesCompare(t *testing.T) {
	exact := time.Date(2026, 12, 1, 3, 42, 0, 123456789, time.FixedZone("X", 5*3600))
	for _, tt := range []struct {
		name   string
		in     time.Time
		want   time.Time
		isZero bool
	}{
		{"zero", time.Time{}, time.Time{}, true},
		{"a moment to the nanosecond", exact, exact, false},
		{"never", neverLate, neverLate, false},
		{"past year 2262", time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), neverLate, false},
	} {
		got := lateInstantOf(tt.in).time()
		if got.IsZero() != tt.isZero || !got.Equal(tt.want) {
			t.Errorf("%s: %s comes back as %s, want %s", tt.name, tt.in, got, tt.want)
		}
	}
	now := time.Date(2260, 1, 1, 0, 0, 0, 0, time.UTC)
	if !now.Before(lateInstantOf(time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)).time()) {
		t.Error("a moment past year 2262 reads as passed")
	}
}

// countersFrom reads counterFields by position, countersOf by name through
// it; each counter lands in its own field of Counters.
func TestCountersFromReadsEachFieldAsItsName(t *testing.T) {
	fieldOf := map[string]string{
		string(OutcomeEnqueued): "Enqueued", counterManual: "Manual", string(OutcomeMissed): "Missed",
		string(OutcomeSkipped): "Skipped", string(OutcomePaused): "Paused", string(OutcomeSucceeded): "Succeeded",
		string(OutcomeFailed): "Failed", counterLastEnqueue: "LastEnqueue", counterLastSuccess: "LastSuccess",
		counterLastFailure: "LastFailure", counterFirstSeen: "FirstSeen", counterLastResume: "LastResume",
		counterLastSlotSuccess: "LastSlotSuccess", string(OutcomeBuffered): "Buffered", string(OutcomeReplaced): "Replaced",
	}
	if len(fieldOf) != len(counterFields) || reflect.TypeFor[Counters]().NumField() != len(counterFields) {
		t.Fatalf("%d counters named, %d read, %d fields in Counters", len(fieldOf), len(counterFields), reflect.TypeFor[Counters]().NumField())
	}
	for i, f := range counterFields {
		vals := make([]int64, len(counterFields))
		vals[i] = 1_700_000_000_000 + int64(i)
		for _, c := range []Counters{countersFrom(vals), countersOf(map[string]int64{f: vals[i]})} {
			v := reflect.ValueOf(c)
			for k := range v.NumField() {
				if set, name := !v.Field(k).IsZero(), v.Type().Field(k).Name; set != (name == fieldOf[f]) {
					t.Errorf("counter %s (position %d): field %s set=%v, want only %s set", f, i, name, set, fieldOf[f])
				}
			}
		}
	}
}
