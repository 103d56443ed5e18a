package registry

import (
	"encoding/json"
	"maps"
	"testing"
	"time"
)

// EncodeOccurrence writes what json.Marshal writes for the occurrence, so
// payloads enqueued before and after it decode alike: every optional field
// set or not, strings json escapes, slots in odd offsets with nanoseconds,
// a trace carrier whose keys sort before and after "traceparent".
func FuzzEncodeOccurrenceMatchesJSON(f *testing.F) {
	f.Add("prune", int64(1796108113), int64(0), "UTC", "", false, "cron:belfry/prune:1796108113", "", "", "")
	f.Add("reports:weekly", int64(1796108113), int64(123456789), "Asia/Kathmandu", "acme", true, "cron:ns/x:member:acme:manual:k", "cron:ns/x:1",
		"tracestate", "vendor=a,other=b")
	f.Add("a\"b\\c<d>&e", int64(-62135596800), int64(1), "America/St_Johns", "tenant\u2028é\x7f\x01", true, "\xff\xfe", "é", "a<\xff", "\u2028")
	f.Fuzz(func(t *testing.T, schedule string, sec, nsec int64, zone, member string, manual bool, id, rerunOf, traceKey, traceValue string) {
		loc, err := LoadZone(zone)
		if err != nil {
			loc = time.UTC
		}
		occ := Occurrence{Schedule: schedule, Slot: time.Unix(sec, nsec%1e9).In(loc), Zone: zone, Member: member,
			Manual: manual, ID: id, RerunOf: rerunOf}
		if traceKey != "" {
			occ.Trace = map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", traceKey: traceValue}
		}
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

// Without a trace carrier the payload is what it was before carriers
// existed, byte for byte; with one, the carrier comes back from the
// payload as it went in, and the rest of the occurrence with it.
func TestTraceCarrierIsOptionalInThePayload(t *testing.T) {
	occ := Occurrence{Schedule: "prune", Slot: time.Date(2026, 11, 1, 5, 59, 59, 0, time.UTC), Zone: "UTC",
		ID: "cron:ns/prune:1793512799"}
	const plain = `{"schedule":"prune","slot":"2026-11-01T05:59:59Z","zone":"UTC","id":"cron:ns/prune:1793512799"}`
	if got := string(EncodeOccurrence(occ)); got != plain {
		t.Errorf("payload without a carrier\n got  %s\n want %s", got, plain)
	}
	occ.Trace = map[string]string{}
	if got := string(EncodeOccurrence(occ)); got != plain {
		t.Errorf("payload with an empty carrier\n got  %s\n want %s", got, plain)
	}
	occ.Trace = map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "tracestate": "v=1"}
	payload := EncodeOccurrence(occ)
	want := plain[:len(plain)-1] + `,"trace":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","tracestate":"v=1"}}`
	if string(payload) != want {
		t.Errorf("payload with a carrier\n got  %s\n want %s", payload, want)
	}
	back, err := DecodeOccurrence(payload)
	if err != nil {
		t.Fatal(err)
	}
	if back.ID != occ.ID || !back.Slot.Equal(occ.Slot) || !maps.Equal(back.Trace, occ.Trace) {
		t.Errorf("decoded %+v, want %+v", back, occ)
	}
}
