package enginetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/core"
)

// single is one replica of a registry over a fresh backend, leading, with
// workers.
func single(t *testing.T, h Harness, exec *executions, scheds ...registry.Schedule) *replica {
	t.Helper()
	queue := queueName("q")
	for i := range scheds {
		scheds[i].Queue = queue
		if scheds[i].Handler == nil {
			scheds[i].Handler = exec.handler
		}
	}
	b := h.NewBackend(t)
	r := newReplica(t, b, mustRegistry(t, scheds...), "solo", replicaSettings{leaseTTL: takeoverTTL})
	b.StartWorkers(t, r.rt)
	r.start()
	waitFor(t, 10*time.Second, "the replica to lead", r.leading)
	return r
}

// A re-run of a slot that ran runs again: its own ID, Manual, the slot's
// own instant and the scheduled occurrence's key (occ.Key()), so a handler
// keyed on it does the slot's work once. The same request key twice
// enqueues once, for a re-run and for a run now; a run now has a key of its
// own. The scheduled occurrence and its re-run are both recorded.
func rerunAndRequestKeys(t *testing.T, h Harness) {
	ctx := context.Background()
	exec := &executions{}
	r := single(t, h, exec, registry.Schedule{Name: "tick", Expr: "*/2 * * * * *"})
	waitFor(t, 10*time.Second, "a scheduled run", exec.ranAfter("tick", "", time.Time{}, 1))
	scheduled := exec.scheduled("tick", "")[0]

	rerun, err := r.rt.Rerun(core.WithActor(ctx, "suite"), "tick", scheduled.Slot, "rerun-1")
	if err != nil {
		t.Fatal(err)
	}
	if again, err := r.rt.Rerun(ctx, "tick", scheduled.Slot, "rerun-1"); err != nil || again.ID != rerun.ID {
		t.Errorf("the same re-run request again: %q, %v; want the first's occurrence %q", again.ID, err, rerun.ID)
	}
	if rerun.ID == scheduled.ID || rerun.Key() != scheduled.Key() || !rerun.Manual || !rerun.Slot.Equal(scheduled.Slot) {
		t.Errorf("re-run of %s: ID %q key %q manual %v slot %s; want an ID of its own, the slot's key %q, manual, the slot",
			scheduled.ID, rerun.ID, rerun.Key(), rerun.Manual, stamp(rerun.Slot), scheduled.Key())
	}
	now1, err := r.rt.Trigger(ctx, "tick", "now-1")
	if err != nil {
		t.Fatal(err)
	}
	if again, err := r.rt.Trigger(ctx, "tick", "now-1"); err != nil || again.ID != now1.ID {
		t.Errorf("the same run-now request again: %q, %v; want the first's occurrence %q", again.ID, err, now1.ID)
	}
	now2, err := r.rt.Trigger(ctx, "tick", "")
	if err != nil {
		t.Fatal(err)
	}
	if now1.Key() == now2.Key() || now1.Key() == scheduled.Key() {
		t.Errorf("runs now have keys %q and %q beside the slot's %q; want each its own", now1.Key(), now2.Key(), scheduled.Key())
	}
	manual := func() []registry.Occurrence {
		return exec.where(func(occ registry.Occurrence) bool { return occ.Manual })
	}
	waitFor(t, 10*time.Second, "the re-run and both runs now", func() bool { return len(manual()) >= 3 })
	// A request run twice would have run by the time a run now enqueued
	// after it has.
	later, err := r.rt.Trigger(ctx, "tick", "")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "a run now enqueued after them", func() bool {
		return len(exec.where(func(occ registry.Occurrence) bool { return occ.ID == later.ID })) == 1
	})
	byID := map[string]int{}
	for _, occ := range manual() {
		byID[occ.ID]++
	}
	for _, occ := range []registry.Occurrence{rerun, now1, now2} {
		if byID[occ.ID] != 1 {
			t.Errorf("%s ran %d times, want once", occ.ID, byID[occ.ID])
		}
	}
	bySlotKey := 0
	for _, occ := range exec.all() {
		if occ.Key() == scheduled.Key() {
			bySlotKey++
		}
	}
	if bySlotKey != 2 {
		t.Errorf("the slot's key ran %d times, want twice: the scheduled run and its re-run", bySlotKey)
	}
	waitFor(t, 10*time.Second, "the scheduled run and its re-run to be recorded succeeded", func() bool {
		hist, err := r.rt.History(ctx, "tick", core.HistoryLimitDefault)
		if err != nil {
			return false
		}
		var sched, re *core.Record
		for i, rec := range hist {
			switch rec.ID {
			case scheduled.ID:
				sched = &hist[i]
			case rerun.ID:
				re = &hist[i]
			}
		}
		return sched != nil && re != nil && sched.Outcome == core.OutcomeSucceeded && !sched.Manual &&
			re.Outcome == core.OutcomeSucceeded && re.Manual && re.Slot.Equal(scheduled.Slot) && re.Actor == "suite"
	})
}

// A backfill of more slots than core.MaxBackfillSlots is refused with
// ErrTooManySlots and enqueues none of them; one of exactly the cap runs
// every slot once.
func backfillCap(t *testing.T, h Harness) {
	ctx := context.Background()
	exec := &executions{}
	r := single(t, h, exec, registry.Schedule{Name: "minutely", Expr: "* * * * *"})
	s := r.rt.Registry().Schedules()[0]
	last := s.Prev(time.Now())
	from := last.Add(-time.Duration(core.MaxBackfillSlots-1) * time.Minute) // the cap's worth, to last
	if _, err := r.rt.Backfill(ctx, "minutely", from.Add(-time.Minute), last, "over"); !errors.Is(err, core.ErrTooManySlots) {
		t.Fatalf("backfill of %d slots: %v, want ErrTooManySlots", core.MaxBackfillSlots+1, err)
	}
	occs, err := r.rt.Backfill(ctx, "minutely", from, last, "at-the-cap")
	if err != nil || len(occs) != core.MaxBackfillSlots {
		t.Fatalf("backfill of %d slots: %d occurrences, %v", core.MaxBackfillSlots, len(occs), err)
	}
	manual := func() []registry.Occurrence {
		return exec.where(func(occ registry.Occurrence) bool { return occ.Manual })
	}
	waitFor(t, 20*time.Second, "the backfill to run", func() bool { return len(manual()) >= core.MaxBackfillSlots })
	// The refused range's extra slot, had it been enqueued, would have
	// run among them.
	bySlot := map[time.Time]int{}
	for _, occ := range manual() {
		bySlot[occ.Slot.UTC()]++
	}
	for at := from; !at.After(last); at = s.Next(at) {
		if bySlot[at.UTC()] != 1 {
			t.Errorf("backfilled slot %s ran %d times, want once", at.UTC().Format(time.RFC3339), bySlot[at.UTC()])
		}
	}
	if n := bySlot[from.Add(-time.Minute).UTC()]; n != 0 {
		t.Errorf("the slot only the refused backfill covered ran %d times", n)
	}
	if len(bySlot) != core.MaxBackfillSlots {
		t.Errorf("the backfills ran %d slots, want %d", len(bySlot), core.MaxBackfillSlots)
	}
}
