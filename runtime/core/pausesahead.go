package core

// Reading pauses ahead. An engine that can (engine.PausesAhead) has the
// leader read the pauses of the schedules due at the next slot while it
// waits for that slot, so that at the slot nothing lies between the
// wake-up and the enqueue's own write. The pauses come with a token that
// the enqueues carry (engine.Fence.Pauses): an enqueue that finds a pause
// or resume committed after the read inserts nothing and fails with
// engine.ErrPausesChanged, and its slots are planned again at the next
// step, with the pauses read when they are due. A pause committed before
// an enqueue's write reads the token holds, as it does when the pauses
// are read at the slot. Only a read that sends every slot due to its
// enqueue is used: a slot it would keep from one (paused) is recorded
// with no write to check the token, so it is read again at the slot.

import (
	"context"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/engine"
)

// pausesAheadMin is the shortest wait the leader reads pauses ahead in:
// a read that might not end before the slot would only move the lag from
// after the wake-up to before it. The read takes at most the time to the
// loop's next due work (a family's slot may come before the schedules'),
// and at most a third of a lease TTL: the loop does not watch the lease
// while it reads.
const pausesAheadMin = 50 * time.Millisecond

// pausesRead are the pauses of the schedules due at one slot, read before
// the slot came due.
type pausesRead struct {
	slot    int64 // unix s
	token   string
	at      map[string]int // a name's place in states and windows
	states  []*engine.Pause
	windows [][]engine.PauseWindow
}

// aheadReader is a leader task that reads, before the loop sleeps, what
// its next due work needs.
type aheadReader interface {
	readAhead(ctx context.Context, now, until time.Time)
}

// readAhead gives each task that reads ahead its turn, before the loop
// sleeps until the next due work, at until.
func (l *leaderLoop) readAhead(ctx context.Context, until time.Time) {
	for _, t := range l.tasks {
		if a, ok := t.(aheadReader); ok {
			a.readAhead(ctx, l.r.clock.Now(), until)
		}
	}
}

// readAhead reads the pauses of the schedules due at the heap's first
// slot, unless they are read already, the engine hands out no tokens, or
// the slot is too near. A failed read is left to the dispatch, which
// reads them again.
func (t *scheduleTask) readAhead(ctx context.Context, now, until time.Time) {
	r, st := t.r, t.st
	ahead, ok := r.eng.(engine.PausesAhead)
	if !ok || st == nil || len(st.queue) == 0 {
		return
	}
	slot := st.queue[0].slotTime()
	limit := min(slot.Sub(now), until.Sub(now), r.opts.LeaseTTL/3)
	if st.ahead != nil && st.ahead.slot == slot.Unix() || limit < pausesAheadMin {
		return
	}
	names := st.queue.namesAt(slot.Unix(), dispatchBatch)
	readCtx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	states, windows, token, err := ahead.PauseStatesAhead(readCtx, names)
	if err != nil {
		r.log.Debug("reading pauses ahead failed; they are read when the slot is due", "slot", slot.UTC(), "error", err)
		return
	}
	at := make(map[string]int, len(names))
	for i, n := range names {
		at[n] = i
	}
	st.ahead = &pausesRead{slot: slot.Unix(), token: token, at: at, states: states, windows: windows}
}

// namesAt is the names of up to limit schedules due at slot, the heap's
// first: those at its front, which are the root and every entry of the
// same slot reached from it (a child is never due before its parent).
func (h dueHeap) namesAt(slot int64, limit int) []string {
	var names []string
	stack := []int{0}
	for len(stack) > 0 && len(names) < limit {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if i >= len(h) || h[i].slot != slot {
			continue
		}
		names = append(names, h[i].sched.Name)
		stack = append(stack, 2*i+1, 2*i+2)
	}
	return names
}

// takeAhead returns the pauses read ahead of the plans' schedules, in
// their order, and their token, if every one was read and the pauses let
// every slot go to its enqueue, whose transaction checks them again: a
// slot that they keep from its enqueue (paused, or in a past pause's
// window), or that an overlap policy may keep from it (recorded skipped,
// or buffered), would be recorded on what was read, unchecked, so such
// plans read the pauses as they are. Either way what was read ahead is
// used up, since the dispatch moves the heap on.
func (st *leaderState) takeAhead(plans []*slotPlan) (states []*engine.Pause, windows [][]engine.PauseWindow, token string, ok bool) {
	read := st.ahead
	st.ahead = nil
	if read == nil {
		return nil, nil, "", false
	}
	states, windows = make([]*engine.Pause, len(plans)), make([][]engine.PauseWindow, len(plans))
	for i, p := range plans {
		k, found := read.at[p.sched.Name]
		if !found || read.states[k] != nil || p.sched.Overlap != registry.OverlapAllow || p.inWindow(read.windows[k]) {
			return nil, nil, "", false
		}
		states[i], windows[i] = read.states[k], read.windows[k]
	}
	return states, windows, read.token, true
}

// inWindow reports whether any slot the plan enqueues is within one of
// the pause windows (see pausedBetween).
func (p *slotPlan) inWindow(windows []engine.PauseWindow) bool {
	for _, w := range windows {
		from, to := time.UnixMilli(w.From), time.UnixMilli(w.To)
		for _, slot := range p.enqueue {
			if !slot.Before(from) && !slot.After(to) {
				return true
			}
		}
	}
	return false
}
