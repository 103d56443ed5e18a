package core

import (
	"errors"
	"slices"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/engine"
)

// The planner decides, without Redis, what the leader does with a schedule
// that came due: which slots to enqueue, which are missed, where the cursor
// goes, and what the commit records. The loop in scheduler.go carries the
// decisions out.

// maxSlotsPerDispatch bounds the slots enumerated for one schedule after a
// long outage; the rest of the backlog is counted as missed in one step.
const maxSlotsPerDispatch = 10000

// maxMissedRecords bounds the missed slots recorded one by one per dispatch
// (all of them are counted).
const maxMissedRecords = 10

// slotPlan is what the leader decided for one due schedule.
type slotPlan struct {
	scope   registry.Scope // whose occurrence IDs the slots get
	sched   *registry.Schedule
	cursor  time.Time // the newest slot handled, committed after the enqueues
	enqueue []time.Time
	missed  []time.Time // newest last, at most maxMissedRecords
	nMissed int
	err     error        // enqueue failed: the cursor stays before the failed slot
	done    []engine.Rec // what was enqueued or skipped, in slot order
	// prevID is, for a family member, its last enqueued occurrence before
	// this plan (overlap=skip), "" if none.
	prevID string
	// buffers are the leader's waiting slots (overlap=buffer_one), nil
	// for the other schedules.
	buffers *buffers
}

// planSlots enumerates the schedule's slots from first (its first slot after
// cursor) through now and sorts them into enqueue and missed by the grace
// window: a slot older than now-grace is missed. misfire=latest enqueues
// the newest missed slot when nothing else is due; misfire=all enqueues the
// missed slots, oldest first, up to registry.MisfireAllCap of the newest.
func planSlots(sc registry.Scope, s *registry.Schedule, first, cursor, now time.Time, grace time.Duration) *slotPlan {
	p := &slotPlan{scope: sc, sched: s, cursor: cursor}
	oldest := now.Add(-grace)
	keep := maxMissedRecords // the newest missed slots kept by value
	if s.Misfire == registry.MisfireAll {
		keep = max(keep, registry.MisfireAllCap)
	}
	var stale []time.Time
	slot := first
	for n := 0; !slot.IsZero() && !slot.After(now); n++ {
		if n == maxSlotsPerDispatch {
			if !slot.Before(oldest) {
				// The rest is within grace: the next pass goes on from
				// the cursor, at once.
				break
			}
			// A backlog this long is all missed: count the rest up to the
			// grace window in one step, keeping only its newest slots,
			// which misfire=latest and misfire=all may run and the cursor
			// moves to.
			skipped, newest := countSlots(s, slot, oldest)
			p.nMissed += skipped
			stale = newestBefore(s, newest, keep, slot)
			p.cursor = newest
			slot = s.AtOrAfter(oldest)
			continue
		}
		if slot.Before(oldest) {
			p.nMissed++
			stale = appendStale(stale, slot, keep)
		} else {
			p.enqueue = append(p.enqueue, slot)
		}
		p.cursor = slot
		slot = s.Next(slot)
	}
	switch {
	case s.Misfire == registry.MisfireAll && len(stale) > 0:
		catchUp := stale[max(0, len(stale)-registry.MisfireAllCap):]
		p.enqueue = append(slices.Clone(catchUp), p.enqueue...)
		p.nMissed -= len(catchUp)
		stale = stale[:len(stale)-len(catchUp)]
		stale = stale[max(0, len(stale)-maxMissedRecords):]
	case misfireLatest(s) && len(p.enqueue) == 0 && len(stale) > 0:
		p.enqueue = []time.Time{stale[len(stale)-1]}
		stale = stale[:len(stale)-1]
		p.nMissed--
	}
	p.missed = stale
	return p
}

// newestBefore returns up to n slots ending with newest, oldest first, none
// before floor.
func newestBefore(s *registry.Schedule, newest time.Time, n int, floor time.Time) []time.Time {
	out := []time.Time{newest}
	for t := newest; len(out) < n; {
		t = s.Prev(t.Add(-time.Second))
		if t.IsZero() || t.Before(floor) {
			break
		}
		out = append(out, t)
	}
	slices.Reverse(out)
	return out
}

func misfireLatest(s *registry.Schedule) bool { return s.Misfire == registry.MisfireLatest }

// appendStale keeps the newest keep missed slots.
func appendStale(stale []time.Time, slot time.Time, keep int) []time.Time {
	stale = append(stale, slot)
	if len(stale) > keep {
		stale = stale[1:]
	}
	return stale
}

// countSlots counts the slots from `from` (inclusive, before until) to
// before `until` and returns the newest, for the rare backlog longer than
// maxSlotsPerDispatch.
func countSlots(s *registry.Schedule, from, until time.Time) (n int, newest time.Time) {
	for t := from; !t.IsZero() && t.Before(until); t = s.Next(t) {
		n, newest = n+1, t
	}
	return n, newest
}

// prevCursor is the cursor to keep when the first slot to enqueue failed:
// the newest missed slot before it, else one second before it, from which
// Next finds that same slot again.
func prevCursor(p *slotPlan) time.Time {
	first := p.enqueue[0]
	if n := len(p.missed); n > 0 && p.missed[n-1].Before(first) {
		return p.missed[n-1]
	}
	return first.Add(-time.Second) // Next(first - 1s) == first
}

// pause turns the plan's slots due within grace into paused ones: recorded,
// never run. Slots older than grace that misfire=latest or misfire=all
// would have run stay missed, as they are without a pause.
func (p *slotPlan) pause(now time.Time, grace time.Duration) {
	oldest := now.Add(-grace)
	for _, slot := range p.enqueue {
		if slot.Before(oldest) {
			p.nMissed++
			p.missed = appendStale(p.missed, slot, maxMissedRecords)
			continue
		}
		p.done = append(p.done, engine.Rec{ID: p.scope.ID(slot), Slot: slot.Unix(),
			At: now.UnixMilli(), Outcome: string(OutcomePaused), Score: slot.UnixMilli()})
	}
	p.enqueue = nil
}

// applyPauses does with the planned slots what the pauses read when they
// came due say: all of them paused (or missed, past grace) while paused
// is set, else those within one of the past pause windows.
func (p *slotPlan) applyPauses(paused bool, windows []engine.PauseWindow, now time.Time, grace time.Duration) {
	if paused {
		p.pause(now, grace)
		return
	}
	for _, w := range windows {
		p.pausedBetween(time.UnixMilli(w.From), time.UnixMilli(w.To), now)
	}
}

// firstPlanErr is the first enqueue error of plans, or engine.ErrNotLeader
// if any plan met a fenced refusal: a commit would be refused too; failing
// that, errTermNotTrusted if any plan stopped at the holder's own look at
// its lease.
func firstPlanErr(plans []*slotPlan) error {
	var first, untrusted error
	for _, p := range plans {
		switch {
		case errors.Is(p.err, errTermNotTrusted):
			untrusted = p.err
		case errors.Is(p.err, engine.ErrNotLeader):
			return engine.ErrNotLeader
		}
		first = cmp2(first, p.err)
	}
	return cmp2(untrusted, first)
}

// pausedBetween records as paused, never run, the planned slots that came
// due while the schedule was paused, from its pause to its resume: a leader
// that reaches them only after the resume (it was down, partitioned or far
// behind) does with them what a leader during the pause would have done.
func (p *slotPlan) pausedBetween(from, to, now time.Time) {
	keep := p.enqueue[:0]
	for _, slot := range p.enqueue {
		if slot.Before(from) || slot.After(to) {
			keep = append(keep, slot)
			continue
		}
		p.done = append(p.done, engine.Rec{ID: p.scope.ID(slot), Slot: slot.Unix(),
			At: now.UnixMilli(), Outcome: string(OutcomePaused), Score: slot.UnixMilli()})
	}
	p.enqueue = keep
}

// failedAt cuts the plan at its k-th slot, whose enqueue failed (err), or
// was turned back with nothing failed (err nil): the cursor stays just
// before it, so the next pass tries it again. Slots recorded
// paused after the cursor (pausedBetween) are dropped from the records,
// since the next pass records them again.
func (p *slotPlan) failedAt(k int, err error) {
	p.err = err
	if k == 0 {
		p.cursor = prevCursor(p)
	} else {
		p.cursor = p.enqueue[k-1]
	}
	p.enqueue = p.enqueue[:k]
	p.done = slices.DeleteFunc(p.done, func(rec engine.Rec) bool { return rec.Slot > p.cursor.Unix() })
}

// recordSlot notes what became of an enqueued, skipped or lost slot, for
// the commit's records.
func (p *slotPlan) recordSlot(occ registry.Occurrence, outcome Outcome, at time.Time) {
	p.done = append(p.done, engine.Rec{ID: occ.ID, Slot: occ.Slot.Unix(), At: at.UnixMilli(),
		Outcome: string(outcome), Score: occ.Slot.UnixMilli()})
}

// lastID is the newest occurrence this plan enqueued, for overlap=skip's
// check of the next slot in the same batch.
func (p *slotPlan) lastID() string {
	for i := len(p.done) - 1; i >= 0; i-- {
		if p.done[i].Outcome == string(OutcomeEnqueued) {
			return p.done[i].ID
		}
	}
	return p.prevID
}

// commit is the plan's part of the fenced commit: the cursor, the records
// of enqueued, skipped and missed slots (missed ones after the cursor, left
// by a failed enqueue, are not recorded yet), and the counter changes.
func (p *slotPlan) commit(now time.Time) engine.Commit {
	c := engine.Commit{Name: p.sched.Name, Cursor: p.cursor.Unix(), Recs: p.done, Counts: map[string]int64{}}
	for _, slot := range p.missed {
		if slot.After(p.cursor) {
			continue
		}
		c.Recs = append(c.Recs, engine.Rec{ID: p.scope.ID(slot), Slot: slot.Unix(),
			At: now.UnixMilli(), Outcome: string(OutcomeMissed), Score: slot.UnixMilli()})
	}
	if p.nMissed > 0 {
		c.Counts[string(OutcomeMissed)] = int64(p.nMissed)
	}
	for _, rec := range p.done {
		c.Counts[rec.Outcome]++
		if rec.Outcome == string(OutcomeEnqueued) {
			c.LastID = rec.ID
			c.Counts[counterLastEnqueue] = rec.At
		}
	}
	if p.buffers != nil {
		if w, ok := p.buffers.get(p.sched.Name); ok {
			c.LastID = encodeLastID(w)
		}
	}
	return c
}

// report tells observers what the committed plan did.
func (p *slotPlan) report(emit func(Event)) {
	name := p.sched.Name
	if p.nMissed > 0 {
		emit(Event{Schedule: name, Outcome: OutcomeMissed, Slots: p.nMissed})
	}
	for _, rec := range p.done {
		e := Event{Schedule: name, Outcome: Outcome(rec.Outcome)}
		if e.Outcome == OutcomeEnqueued {
			e.Lag = time.UnixMilli(rec.At).Sub(time.Unix(rec.Slot, 0))
		}
		emit(e)
	}
}
