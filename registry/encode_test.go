package registry

import (
	"encoding/json"
	"testing"
	"time"
)

// EncodeOccurrence writes what json.Marshal writes for the occurrence, so
// payloads enqueued before and after it decode alike: every optional field
// set or not, strings json escapes, slots in odd offsets with nanoseconds.
func FuzzEncodeOccurrenceMatchesJSON(f *testing.F) {
	f.Add("prune", int64(1796108113), int64(0), "UTC", "", false, "cron:belfry/prune:1796108113", "")
	f.Add("reports:weekly", int64(1796108113), int64(123456789), "Asia/Kathmandu", "acme", true, "cron:ns/x:member:acme:manual:k", "cron:ns/x:1")
	f.Add("a\"b\\c<d>&e", int64(-62135596800), int64(1), "America/St_Johns", "tenant\u2028é\x7f\x01", true, "\xff\xfe", "é")
	f.Fuzz(func(t *testing.T, schedule string, sec, nsec int64, zone, member string, manual bool, id, rerunOf string) {
		loc, err := LoadZone(zone)
		if err != nil {
			loc = time.UTC
		}
		occ := Occurrence{Schedule: schedule, Slot: time.Unix(sec, nsec%1e9).In(loc), Zone: zone, Member: member,
			Manual: manual, ID: id, RerunOf: rerunOf}
		want, err := json.Marshal(occ)
		if err != nil {
			return // a year json cannot write: EncodeOccurrence panics, as it always did
		}
		if got := EncodeOccurrence(occ); string(got) != string(want) {
			t.Errorf("EncodeOccurrence(%+v)\n got  %s\n want %s", occ, got, want)
		}
	})
}

func BenchmarkEncodeOccurrence(b *testing.B) {
	occ := Occurrence{Schedule: "reports:weekly", Slot: time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC), Zone: "UTC",
		Member: "acme", ID: "cron:billing/reports:weekly:member:acme:1793610000"}
	b.ReportAllocs()
	for b.Loop() {
		EncodeOccurrence(occ)
	}
}

// The json.Marshal EncodeOccurrence replaced, for the ratio.
func BenchmarkEncodeOccurrenceJSONMarshal(b *testing.B) {
	occ := Occurrence{Schedule: "reports:weekly", Slot: time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC), Zone: "UTC",
		Member: "acme", ID: "cron:billing/reports:weekly:member:acme:1793610000"}
	b.ReportAllocs()
	for b.Loop() {
		json.Marshal(occ)
	}
}

// The payload is these bytes: workers of every version decode what any
// replica enqueues, and tasks already queued outlive an upgrade, so a
// change to the payload's form is a change to the stored format.
func TestOccurrencePayloadBytes(t *testing.T) {
	occ := Occurrence{Schedule: "prune", Slot: time.Date(2026, 11, 1, 5, 59, 59, 0, time.UTC), Zone: "UTC",
		ID: "cron:ns/prune:1793512799"}
	const want = `{"schedule":"prune","slot":"2026-11-01T05:59:59Z","zone":"UTC","id":"cron:ns/prune:1793512799"}`
	if got := string(EncodeOccurrence(occ)); got != want {
		t.Errorf("payload\n got  %s\n want %s", got, want)
	}
}

// Occurrence stays comparable: services compare occurrences with == and
// use them as map keys, so a field that is a map, slice or func would
// break their builds.
func TestOccurrenceIsComparable(t *testing.T) {
	occ := Occurrence{Schedule: "prune", Slot: time.Unix(1793512799, 0).UTC(), Zone: "UTC", ID: "cron:ns/prune:1793512799"}
	seen := map[Occurrence]bool{occ: true}
	if again := occ; again != occ || !seen[again] {
		t.Errorf("a copy of an occurrence is not equal to it")
	}
}
