package core

import (
	"container/heap"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/engine"
)

// The names read ahead are those of every schedule due at the heap's
// first slot, however the heap holds them, up to the limit; none due
// later.
func TestNamesAtAreTheSchedulesDueAtTheFirstSlot(t *testing.T) {
	var h dueHeap
	var want []string
	for i := range 40 {
		s := &registry.Schedule{Name: string(rune('a'+i%26)) + string(rune('a'+i/26))}
		slot := int64(100 + i%3) // a third due at 100, the rest later
		if slot == 100 {
			want = append(want, s.Name)
		}
		heap.Push(&h, due{sched: s, slot: slot})
	}
	got := h.namesAt(100, len(h))
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("namesAt(100) = %v; want %v", got, want)
	}
	if n := len(h.namesAt(100, 5)); n != 5 {
		t.Errorf("namesAt(100) limited to 5 gave %d", n)
	}
}

// What was read ahead plans a dispatch only when it covers every plan and
// lets every slot go to its enqueue; it is used up either way.
func TestTakeAheadFallsBackUnlessEverySlotGoesToItsEnqueue(t *testing.T) {
	slot := time.Unix(1000, 0)
	plan := func(name string, overlap registry.Overlap) *slotPlan {
		return &slotPlan{sched: &registry.Schedule{Name: name, Overlap: overlap}, enqueue: []time.Time{slot}}
	}
	read := func(pause *engine.Pause, windows []engine.PauseWindow) *pausesRead {
		return &pausesRead{slot: slot.Unix(), token: "7", at: map[string]int{"a": 0, "b": 1},
			states: []*engine.Pause{nil, pause}, windows: [][]engine.PauseWindow{nil, windows}}
	}
	around := []engine.PauseWindow{{From: slot.Add(-time.Second).UnixMilli(), To: slot.Add(time.Second).UnixMilli()}}
	before := []engine.PauseWindow{{From: slot.Add(-time.Hour).UnixMilli(), To: slot.Add(-time.Minute).UnixMilli()}}
	for _, c := range []struct {
		what  string
		ahead *pausesRead
		plans []*slotPlan
		ok    bool
	}{
		{"all running", read(nil, nil), []*slotPlan{plan("b", registry.OverlapAllow), plan("a", registry.OverlapAllow)}, true},
		{"a window before the slot", read(nil, before), []*slotPlan{plan("b", registry.OverlapAllow)}, true},
		{"nothing read", nil, []*slotPlan{plan("a", registry.OverlapAllow)}, false},
		{"a schedule not read", read(nil, nil), []*slotPlan{plan("a", registry.OverlapAllow), plan("c", registry.OverlapAllow)}, false},
		{"a paused schedule", read(&engine.Pause{}, nil), []*slotPlan{plan("b", registry.OverlapAllow)}, false},
		{"a window around the slot", read(nil, around), []*slotPlan{plan("b", registry.OverlapAllow)}, false},
		{"overlap=skip", read(nil, nil), []*slotPlan{plan("a", registry.OverlapSkip)}, false},
	} {
		st := &leaderState{ahead: c.ahead}
		states, _, token, ok := st.takeAhead(c.plans)
		if ok != c.ok || ok && (token != "7" || len(states) != len(c.plans)) {
			t.Errorf("%s: took %v (token %q, %d states); want %v", c.what, ok, token, len(states), c.ok)
		}
		if st.ahead != nil {
			t.Errorf("%s: what was read ahead is kept after the dispatch", c.what)
		}
	}
}

// deadlineEngine answers PauseStatesAhead, noting how long the read was
// given.
type deadlineEngine struct {
	engine.Engine
	given time.Duration
}

func (e *deadlineEngine) PauseStatesAhead(ctx context.Context, names []string) ([]*engine.Pause, [][]engine.PauseWindow, string, error) {
	if d, ok := ctx.Deadline(); ok {
		e.given = time.Until(d)
	}
	return make([]*engine.Pause, len(names)), make([][]engine.PauseWindow, len(names)), "1", nil
}

// The read ahead takes at most the time to the loop's next due work (a
// family's slot may come first) and a third of a lease TTL, the loop
// watching neither the lease nor that work meanwhile; it is not made
// when that leaves too little time.
func TestTheReadAheadIsBoundedByTheNextWorkAndTheLease(t *testing.T) {
	now := time.Unix(1_800_000_000, 0) // slots are whole seconds
	for _, c := range []struct {
		what        string
		slot, until time.Duration // the schedules' next slot, the loop's next due work, from now
		ttl         time.Duration
		want        time.Duration // the read's time; 0: no read
	}{
		{"a daily slot, a lease of 3 s", 24 * time.Hour, 24 * time.Hour, 3 * time.Second, time.Second},
		{"a family's slot first", time.Hour, 300 * time.Millisecond, 30 * time.Second, 300 * time.Millisecond},
		{"the slot first", time.Second, time.Hour, 30 * time.Second, time.Second},
		{"too near", time.Hour, 20 * time.Millisecond, 30 * time.Second, 0},
	} {
		eng := &deadlineEngine{}
		r := &Runtime{eng: eng, opts: Options{LeaseTTL: c.ttl}}
		st := &leaderState{}
		heap.Push(&st.queue, due{sched: &registry.Schedule{Name: "a"}, slot: now.Add(c.slot).Unix()})
		(&scheduleTask{r: r, st: st}).readAhead(context.Background(), now, now.Add(c.until))
		switch {
		case c.want == 0 && st.ahead != nil:
			t.Errorf("%s: read ahead, given %s; want no read", c.what, eng.given)
		case c.want == 0:
		case st.ahead == nil:
			t.Errorf("%s: no read; want one given %s", c.what, c.want)
		case eng.given > c.want || eng.given < c.want-time.Second/10:
			t.Errorf("%s: the read was given %s; want %s", c.what, eng.given, c.want)
		}
	}
}
