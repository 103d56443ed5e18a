package core

import (
	"context"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/internal/clock"
)

// A buffer_one schedule's last ID carries its waiting slot beside the
// running occurrence, and reads back as it was written; a plain last ID
// (any other schedule's, or one with nothing waiting) reads as itself.
func TestLastIDCarriesTheWaitingSlot(t *testing.T) {
	t.Parallel()
	w := waitingSlot{behind: "cron:ns/sync:1796500000", slot: 1796500001}
	id, got, waiting := parseLastID(encodeLastID(w))
	if !waiting || got != w || id != w.behind {
		t.Errorf("parseLastID(encodeLastID(%+v)) = %q, %+v, %v", w, id, got, waiting)
	}
	for _, v := range []string{"cron:ns/sync:1796500000", "", "cron:ns/sync:1796500000 soon"} {
		id, _, waiting := parseLastID(v)
		if waiting || id != firstField(v) {
			t.Errorf("parseLastID(%q) = %q, waiting %v; want the ID alone, nothing waiting", v, id, waiting)
		}
	}
	if got := slotOfID(w.behind); got.Unix() != 1796500000 {
		t.Errorf("slotOfID(%q) = %d", w.behind, got.Unix())
	}
}

func firstField(v string) string {
	for i := range len(v) {
		if v[i] == ' ' {
			return v[:i]
		}
	}
	return v
}

// A waiting slot released a second time (a holder that enqueued it
// stopped before its commit, and the next one releases it again) inserts
// nothing: it neither counts another enqueue nor sets its record, which
// its run has moved on, back to "enqueued".
func TestAReleaseAgainCountsAndRecordsNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := clock.NewStub(time.Now().Truncate(time.Second))
	r, value := leadingRuntimeWith(t, Options{}, clk, nil,
		registry.Schedule{Name: "sync", Expr: "* * * * * *", Overlap: registry.OverlapBufferOne})
	s, _ := r.reg.Lookup("sync")
	st := &leaderState{value: value}
	w := waitingSlot{behind: s.Occurrence(r.opts.Namespace, clk.Now().Add(-time.Second)).ID, slot: clk.Now().Unix()}
	if err := r.releaseOne(ctx, st, s, w); err != nil {
		t.Fatal(err)
	}
	occ := s.Occurrence(r.opts.Namespace, time.Unix(w.slot, 0))
	r.recordExecution(ctx, occ, 0, OutcomeRunning, clk.Now(), "started_at", clk.Now().UnixMilli())
	if err := r.releaseOne(ctx, st, s, w); err != nil {
		t.Fatal(err)
	}
	stats, err := r.redisEngine().Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := stats["sync"][string(OutcomeEnqueued)]; got != 1 {
		t.Errorf("%d enqueues counted for one slot released twice, want 1", got)
	}
	recs, err := r.eng.Records(ctx, []string{occ.ID})
	if err != nil || len(recs) != 1 {
		t.Fatalf("records of %s: %v, %v", occ.ID, recs, err)
	}
	if recs[0].Outcome != string(OutcomeRunning) {
		t.Errorf("record of the released slot says %q after the second release, want %q", recs[0].Outcome, OutcomeRunning)
	}
}
