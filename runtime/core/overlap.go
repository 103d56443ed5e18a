package core

// overlap=buffer_one and overlap=replace.
//
// buffer_one: a slot that comes due while the schedule's previous
// occurrence is pending or running is not enqueued; the leader keeps it
// waiting (recorded "buffered") and enqueues it once that occurrence has
// ended, which it looks at every bufferPoll. While one waits, further
// slots are recorded "skipped". The waiting slot lives where the
// schedule's last enqueued ID does (the engine's cursor state, written by
// the leader's fenced commit): "<running ID> <waiting slot>". A new
// holder reads it back with the cursors, so a takeover keeps the waiting
// slot, and its enqueue sets the last ID to its own occurrence in the
// same fenced write as the task: a holder that crashes after it leaves
// the next one nothing to enqueue again. Only the holder enqueues it, and
// only once the engine says the previous task is no longer pending,
// running or waiting to retry: the two never run at once.
//
// replace: a slot that comes due while the previous occurrence is pending
// or running is enqueued (fenced, as every slot), and then the previous
// one is recorded "replaced" (its error naming the new occurrence) and
// cancelled through the engine (engine.Canceler): asynq's
// CancelProcessing of a running task or the deletion of a waiting one,
// River's JobCancel. The cancelled handler's ctx ends; the recording
// middleware keeps the record "replaced" rather than "failed", and an
// attempt of a replaced occurrence that the queue still delivers (asynq
// retries a cancelled task) returns at once without running the handler.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/engine"
)

// bufferPoll is how often the leader asks whether the occurrence a
// buffered slot waits behind has ended.
const bufferPoll = 500 * time.Millisecond

// waitingSlot is an overlap=buffer_one schedule's slot waiting behind its
// running occurrence (behind, an occurrence ID).
type waitingSlot struct {
	behind string
	slot   int64 // unix s
}

// encodeLastID is a buffer_one schedule's last ID while a slot waits:
// the running occurrence's ID, a space and the waiting slot. Occurrence
// IDs hold no spaces.
func encodeLastID(w waitingSlot) string {
	return w.behind + " " + strconv.FormatInt(w.slot, 10)
}

// parseLastID reads a last ID: the occurrence ID, and the waiting slot
// when one waits behind it.
func parseLastID(v string) (id string, w waitingSlot, waiting bool) {
	id, slot, ok := strings.Cut(v, " ")
	if !ok {
		return v, waitingSlot{}, false
	}
	n, err := strconv.ParseInt(slot, 10, 64)
	if err != nil {
		return id, waitingSlot{}, false
	}
	return id, waitingSlot{behind: id, slot: n}, true
}

// buffers are the waiting slots of the leader's buffer_one schedules,
// by schedule name. Plans of different schedules decide at once.
type buffers struct {
	mu      sync.Mutex
	waiting map[string]waitingSlot
	// nextPoll is when the leader next asks about the running ones.
	nextPoll time.Time
}

func (b *buffers) get(name string) (waitingSlot, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	w, ok := b.waiting[name]
	return w, ok
}

func (b *buffers) set(name string, w waitingSlot) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.waiting == nil {
		b.waiting = map[string]waitingSlot{}
	}
	b.waiting[name] = w
}

func (b *buffers) remove(name string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.waiting, name)
}

func (b *buffers) any() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.waiting) > 0
}

func (b *buffers) snapshot() map[string]waitingSlot {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string]waitingSlot, len(b.waiting))
	for k, v := range b.waiting {
		out[k] = v
	}
	return out
}

// loadBuffers reads back the slots waiting behind a running occurrence of
// the registry's buffer_one schedules.
func (r *Runtime) loadBuffers(ctx context.Context, b *buffers) error {
	for _, s := range r.reg.Schedules() {
		if s.Overlap != registry.OverlapBufferOne || s.Family() {
			continue
		}
		v, err := r.eng.LastID(ctx, s.Name)
		if err != nil {
			return err
		}
		if _, w, ok := parseLastID(v); ok {
			b.set(s.Name, w)
		}
	}
	return nil
}

// overlapVerdict is what a slot of a buffer_one or replace schedule
// becomes: outcome (enqueued, buffered or skipped) and why, and for
// replace the running occurrence it cancels, "" for none.
type overlapVerdict struct {
	outcome          Outcome
	reason, replaces string
}

// overlapDecision decides a slot of a buffer_one or replace schedule.
func (r *Runtime) overlapDecision(ctx context.Context, p *slotPlan, slot time.Time) (overlapVerdict, error) {
	s := p.sched
	if s.Overlap == registry.OverlapBufferOne {
		if w, waiting := p.buffers.get(s.Name); waiting {
			return overlapVerdict{outcome: OutcomeSkipped, reason: fmt.Sprintf("overlap=buffer_one: slot %s already waits behind %s",
				time.Unix(w.slot, 0).UTC().Format(time.RFC3339), w.behind)}, nil
		}
	}
	enqueue := overlapVerdict{outcome: OutcomeEnqueued}
	prev, err := r.previousID(ctx, s, p.lastID())
	if err != nil || prev == "" {
		return enqueue, err
	}
	busy, err := r.eng.TaskRunning(ctx, s.Queue, prev)
	if err != nil || !busy {
		return enqueue, err
	}
	if s.Overlap == registry.OverlapReplace {
		enqueue.replaces = prev
		return enqueue, nil
	}
	p.buffers.set(s.Name, waitingSlot{behind: prev, slot: slot.Unix()})
	return overlapVerdict{outcome: OutcomeBuffered, reason: "overlap=buffer_one: waits behind " + prev}, nil
}

// previousID is the schedule's newest enqueued occurrence: the newest of
// the plan's, else the one the engine holds, "" for none.
func (r *Runtime) previousID(ctx context.Context, s *registry.Schedule, lastInBatch string) (string, error) {
	if lastInBatch != "" {
		return lastInBatch, nil
	}
	v, err := r.eng.LastID(ctx, s.Name)
	id, _, _ := parseLastID(v)
	return id, err
}

// replaceRunning records the occurrence old replaced by the newer one by
// and cancels its task. The record comes first, so that the cancelled
// handler's middleware finds it when its ctx ends.
func (r *Runtime) replaceRunning(ctx context.Context, s *registry.Schedule, old string, by registry.Occurrence) {
	canceler, ok := r.eng.(engine.Canceler)
	if !ok {
		r.log.Warn("overlap=replace: this engine cannot cancel a task; the previous occurrence runs on", "schedule", s.Name, "id", old)
		return
	}
	// The record and the cancel go together, even when the leader stops
	// between them: a record of replaced over a task left running would
	// not be true.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	attempt := 0
	if recs, err := r.eng.Records(ctx, []string{old}); err == nil && len(recs) == 1 {
		attempt = recs[0].Attempt
	}
	now := r.clock.Now()
	e := engine.Execution{ID: old, Schedule: s.Name, Slot: slotOfID(old), At: now, Attempt: attempt,
		Count: string(OutcomeReplaced), Fields: []any{"outcome", string(OutcomeReplaced),
			"error", replacedError(by.ID), "finished_at", now.UnixMilli(), "replaced_by", by.ID}}
	if err := r.eng.RecordExecution(ctx, e); err != nil {
		r.log.Warn("overlap=replace: could not record the replaced occurrence", "id", old, "err", err)
	}
	if err := canceler.CancelTask(ctx, s.Queue, old); err != nil {
		r.log.Warn("overlap=replace: could not cancel the previous occurrence", "id", old, "by", by.ID, "err", err)
	}
	r.emit(Event{Schedule: s.Name, Outcome: OutcomeReplaced})
}

// slotOfID is the slot of a scheduled occurrence's ID (its last field).
func slotOfID(id string) time.Time {
	n, _ := strconv.ParseInt(id[strings.LastIndexByte(id, ':')+1:], 10, 64)
	return time.Unix(n, 0)
}

func replacedError(by string) string { return "replaced by " + by }

// replacedBy is the occurrence that replaced occ, "" if none: an attempt
// of occ delivered after its cancel does nothing, and one that its cancel
// interrupted is recorded replaced. The leader's mark of it stands
// whatever the worker wrote of the record meanwhile (a "running" written
// just after the mark, by a worker that took the task as it was
// replaced).
func (r *Runtime) replacedBy(ctx context.Context, s *registry.Schedule, occ registry.Occurrence) string {
	canceler, ok := r.eng.(engine.Canceler)
	if s.Overlap != registry.OverlapReplace || r.disabled != "" || !ok {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	// The occurrence's own ID, not its key: a re-run's key is the replaced
	// occurrence's ID, but the re-run is a new occurrence nothing replaced.
	id := occ.ID
	if id == "" {
		id = occ.Key()
	}
	by, err := canceler.ReplacedBy(ctx, id)
	if err != nil {
		r.log.Warn("overlap=replace: could not read whether the occurrence was replaced", "id", id, "err", err)
	}
	return by
}

// releaseBuffered enqueues each waiting slot whose running occurrence
// has ended. It runs with no commit running or pending, so the cursor it
// reads is the one its enqueue's mark keeps.
func (r *Runtime) releaseBuffered(ctx context.Context, st *leaderState) error {
	for name, w := range st.buffers.snapshot() {
		s, ok := r.reg.Lookup(name)
		if !ok {
			st.buffers.remove(name)
			continue
		}
		running, err := r.eng.TaskRunning(ctx, s.Queue, w.behind)
		if err != nil {
			return err
		}
		if running {
			continue
		}
		if err := r.releaseOne(ctx, st, s, w); err != nil {
			return err
		}
		st.buffers.remove(name)
	}
	return nil
}

// releaseOne enqueues a buffered slot, fenced, its mark setting the
// schedule's last ID to the slot's occurrence and keeping its cursor.
func (r *Runtime) releaseOne(ctx context.Context, st *leaderState, s *registry.Schedule, w waitingSlot) error {
	if v, held := r.eng.Current(); !held || v != st.value {
		return errTermNotTrusted
	}
	cursors, known, err := r.eng.Cursors(ctx, []string{s.Name})
	if err != nil {
		return err
	}
	cursor := w.slot
	if known[0] {
		cursor = max(cursor, cursors[0])
	}
	occ := s.Occurrence(r.opts.Namespace, time.Unix(w.slot, 0))
	now := r.clock.Now()
	// A holder that enqueued it and stopped before its commit leaves the
	// waiting slot to the next one, whose enqueue then finds the task (or
	// its run's record): that record is not set back to "enqueued".
	released, err := r.releasedAlready(ctx, occ.ID)
	if err != nil {
		return err
	}
	// "enqueued" before the enqueue: a worker that starts the task at once
	// then writes "running" over it, not the other way round.
	if !released {
		if err := r.eng.RecordExecution(ctx, engine.Execution{ID: occ.ID, Schedule: s.Name, Slot: occ.Slot, At: now,
			Fields: []any{"outcome", string(OutcomeEnqueued), "enqueued_at", now.UnixMilli()}}); err != nil {
			return err
		}
	}
	fence := &engine.Fence{Term: st.value}
	carrier, enqueued := r.beforeEnqueue(ctx, s, occ)
	res := r.eng.EnqueueAll(ctx, fence, []engine.Enqueue{{Task: r.task(s, occ, carrier, r.retention(s, occ.Slot)),
		Cursor: engine.CursorMark{Schedule: s.Name, Slot: cursor, LastID: occ.ID}}})[0]
	if enqueued != nil {
		enqueued(res.Inserted, res.Err)
	}
	if res.Err != nil {
		if fence.Rejected() {
			return engine.ErrNotLeader
		}
		return fmt.Errorf("enqueue buffered %s: %w", occ.ID, res.Err)
	}
	// The last ID goes with the cursor too: the mark's alone reads as the
	// last ID only while it is ahead of the cursor, and this one is not.
	c := engine.Commit{Name: s.Name, Cursor: cursor, LastID: occ.ID, Counts: map[string]int64{}}
	if res.Inserted {
		c.Counts[string(OutcomeEnqueued)], c.Counts[counterLastEnqueue] = 1, now.UnixMilli()
	}
	if err := r.eng.Commit(ctx, st.value, []engine.Commit{c}); err != nil {
		return err
	}
	if res.Inserted {
		r.emit(Event{Schedule: s.Name, Outcome: OutcomeEnqueued, Lag: now.Sub(occ.Slot)})
	}
	return nil
}

// releasedAlready reports whether the buffered occurrence id's record has
// gone past "buffered": its slot was enqueued already.
func (r *Runtime) releasedAlready(ctx context.Context, id string) (bool, error) {
	recs, err := r.eng.Records(ctx, []string{id})
	if err != nil || len(recs) == 0 {
		return false, err
	}
	return recs[0].Outcome != "" && recs[0].Outcome != string(OutcomeBuffered), nil
}
