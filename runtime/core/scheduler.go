package core

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/engine"
)

// due is a schedule's next slot in the leader's heap, and its cursor (the
// last slot handled), in unix seconds: 24 bytes a schedule, the leader's
// whole state of it, since at 100,000 schedules every byte here is 100 kB.
type due struct {
	sched        *registry.Schedule
	slot, cursor int64
}

func (d due) slotTime() time.Time   { return time.Unix(d.slot, 0) }
func (d due) cursorTime() time.Time { return time.Unix(d.cursor, 0) }

// dueAt is the heap entry of a schedule whose cursor is cursor, or false
// if it never fires again.
func dueAt(s *registry.Schedule, cursor time.Time) (due, bool) {
	next := s.Next(cursor)
	return due{sched: s, slot: next.Unix(), cursor: cursor.Unix()}, !next.IsZero()
}

type dueHeap []due

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].slot < h[j].slot }
func (h dueHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)        { *h = append(*h, x.(due)) }
func (h *dueHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// leaderState is what the holder keeps in memory while it leads: each
// schedule's cursor and next slot. It is rebuilt from Redis whenever the
// lease changes hands, since another leader may have advanced the cursors.
type leaderState struct {
	value string
	queue dueHeap
	// uncommitted are the plans enqueued since the last commit started.
	// They are committed once nothing more is due, so that a spike's
	// commits do not take Redis from its enqueues: each enqueue has raised
	// its cursor already, and what waits is the rest of the step (missed
	// and paused slots, records, counters).
	uncommitted []*slotPlan
	commits     []engine.Commit
	// committing is the commit running in the background, nil when none.
	committing *batchCommit
	// plansBuf and namesBuf are dispatch's scratch, kept between dispatches
	// so that a slot with thousands due does not grow them again each time.
	plansBuf []*slotPlan
	namesBuf []string
	// buffers are the slots of buffer_one schedules waiting behind a
	// running occurrence (overlap.go).
	buffers buffers
	// ahead are the pauses read, before the loop slept, of the schedules
	// due at the heap's first slot (pausesahead.go); nil when none were.
	ahead *pausesRead
}

// dispatchBatch bounds the schedules one dispatch takes from the heap, so
// that when many come due at once (100,000 at midnight) the loop looks at
// its lease, its context and its running commit between batches.
const dispatchBatch = 4096

// maxUncommitted bounds the plans waiting for their commit while more is
// still due (a few hundred bytes each): past it, a commit starts alongside
// the enqueues that go on.
const maxUncommitted = 100000

// batchCommit is a fenced commit running in the background.
type batchCommit struct {
	plans []*slotPlan
	done  chan struct{}
	err   error
}

func (c *batchCommit) ended() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// scheduleTask is the leader loop's task for the ordinary schedules.
type scheduleTask struct {
	r  *Runtime
	st *leaderState // nil while not leading
}

func (t *scheduleTask) load(ctx context.Context, value string, resume time.Time) error {
	st, err := t.r.loadLeaderState(ctx, value, resume)
	t.st = st
	return err
}

func (t *scheduleTask) drop() { t.st = nil }

// step commits what a finished background commit leaves, bounds the
// backlog of uncommitted plans, dispatches what is due, and commits once
// nothing more is due, in that order of preference.
func (t *scheduleTask) step(ctx context.Context, now time.Time) (bool, time.Time, *dispatchLate, error) {
	r, st := t.r, t.st
	switch {
	case st.committing != nil && st.committing.ended():
		return true, time.Time{}, nil, r.finishCommit(st)
	case len(st.uncommitted) >= maxUncommitted && st.committing == nil:
		r.startCommit(ctx, st) // still due, but the backlog is bounded
		return true, time.Time{}, nil, nil
	case len(st.queue) > 0 && !st.queue[0].slotTime().After(now):
		late, err := r.dispatch(ctx, st, now)
		return true, time.Time{}, &late, err
	case len(st.uncommitted) > 0 && st.committing == nil:
		r.startCommit(ctx, st)
		return true, time.Time{}, nil, nil
	case st.committing == nil && st.buffers.any() && !now.Before(st.buffers.nextPoll):
		// With no commit running or pending, the cursors the release
		// reads are those its enqueues keep.
		st.buffers.nextPoll = now.Add(bufferPoll)
		return true, time.Time{}, nil, r.releaseBuffered(ctx, st)
	}
	var next time.Time
	if len(st.queue) > 0 {
		next = st.queue[0].slotTime()
	}
	if st.committing == nil && st.buffers.any() && (next.IsZero() || st.buffers.nextPoll.Before(next)) {
		next = st.buffers.nextPoll
	}
	return false, next, nil, nil // zero: idle, or waiting for the running commit
}

func (t *scheduleTask) committed() <-chan struct{} {
	if t.st == nil || t.st.committing == nil {
		return nil
	}
	return t.st.committing.done
}

func (t *scheduleTask) flush(ctx context.Context) error {
	if t.st == nil {
		return nil
	}
	return t.r.flushCommits(ctx, t.st)
}

// loadLeaderState reads every cursor and starts schedules seen for the
// first time from now, or every schedule from resume after a loss of
// Redis data (see checkLostWrites).
func (r *Runtime) loadLeaderState(ctx context.Context, value string, resume time.Time) (*leaderState, error) {
	scheds := r.reg.Schedules()
	cursors, known, err := r.eng.Cursors(ctx, r.names())
	if err != nil {
		return nil, err
	}
	now := r.clock.Now().Truncate(time.Second)
	st := &leaderState{value: value, queue: make(dueHeap, 0, len(scheds))}
	var fresh, movedNames []string
	var moved []engine.Commit
	for i, s := range scheds {
		if s.Family() {
			continue // scheduled per member, by familyTask
		}
		cursor := now
		switch {
		case known[i] && !resume.After(time.Unix(cursors[i], 0)):
			cursor = time.Unix(cursors[i], 0)
		case !resume.IsZero():
			// Writes were lost: past every slot any replica may have
			// enqueued, so none runs twice.
			cursor = resume
			movedNames = append(movedNames, s.Name)
			// Slots before the new cursor are never reported late.
			moved = append(moved, engine.Commit{Name: s.Name, Cursor: resume.Unix(),
				Counts: map[string]int64{counterLastResume: resume.UnixMilli()}})
		case known[i]:
			cursor = time.Unix(cursors[i], 0)
		default:
			fresh = append(fresh, s.Name)
		}
		if d, ok := dueAt(s, cursor); ok {
			st.queue = append(st.queue, d)
		}
	}
	heap.Init(&st.queue)
	if err := r.loadBuffers(ctx, &st.buffers); err != nil {
		return nil, err
	}
	// A schedule whose cursor the loss took is seen again from the new
	// cursor (first_seen); then every moved cursor is set.
	if err := r.eng.InitCursors(ctx, value, resume.Unix(), movedNames); err != nil {
		return nil, err
	}
	if err := r.eng.Commit(ctx, value, moved); err != nil {
		return nil, err
	}
	if err := r.eng.InitCursors(ctx, value, now.Unix(), fresh); err != nil {
		return nil, err
	}
	r.log.Info("scheduling", "schedules", len(scheds), "new", len(fresh))
	return st, nil
}

// dispatch handles the schedules due at now, at most dispatchBatch of
// them: it enqueues their slots (idempotent by task ID, each raising its
// cursor in the same script) and leaves the rest of the step to the
// commit that follows. A crash between the two leaves the next holder
// nothing to enqueue again. It returns the dispatch's lateness, which
// counts toward handing the lease over (handover.go), failed or not.
func (r *Runtime) dispatch(ctx context.Context, st *leaderState, now time.Time) (late dispatchLate, err error) {
	plans, names := st.plansBuf[:0], st.namesBuf[:0]
	defer func() {
		// Kept for the next dispatch, without what they point to.
		clear(plans)
		clear(names)
		st.plansBuf, st.namesBuf = plans[:0], names[:0]
	}()
	late.earliest = st.queue[0].slotTime()
	for len(st.queue) > 0 && !st.queue[0].slotTime().After(now) && len(plans) < dispatchBatch {
		d := heap.Pop(&st.queue).(due)
		p := planSlots(r.scope(d.sched), d.sched, d.slotTime(), d.cursorTime(), now, r.grace(d.sched))
		if d.sched.Overlap == registry.OverlapBufferOne {
			p.buffers = &st.buffers
		}
		plans = append(plans, p)
		names = append(names, d.sched.Name)
	}
	// Pauses are read when slots come due, or before and checked again by
	// the enqueues (fence.Pauses), so a pause set on any replica holds
	// from the next slot on, whoever leads.
	fence := &engine.Fence{Term: st.value}
	pauses, windows, token, ok := st.takeAhead(plans)
	if ok {
		fence.Pauses = token
	} else if pauses, windows, err = r.eng.PauseStates(ctx, names); err != nil {
		return late, err
	}
	for i, p := range pauses {
		plans[i].applyPauses(p != nil, windows[i], now, r.grace(plans[i].sched))
	}
	r.enqueueAll(ctx, fence, plans)
	late.enqueued = r.clock.Now()
	firstErr := firstPlanErr(plans)
	if errors.Is(firstErr, engine.ErrNotLeader) {
		return late, firstErr
	}
	st.uncommitted = slices.Grow(st.uncommitted, len(plans))
	st.commits = slices.Grow(st.commits, len(plans))
	for _, p := range plans {
		st.uncommitted = append(st.uncommitted, p)
		st.commits = append(st.commits, p.commit(now))
		if d, ok := dueAt(p.sched, p.cursor); ok {
			heap.Push(&st.queue, d)
		}
	}
	return late, firstErr // the state is rebuilt from Redis once this batch is committed
}

// startCommit commits the uncommitted plans in the background.
func (r *Runtime) startCommit(ctx context.Context, st *leaderState) {
	c := &batchCommit{plans: st.uncommitted, done: make(chan struct{})}
	commits := st.commits
	st.uncommitted, st.commits, st.committing = nil, nil, c
	go func() {
		defer close(c.done)
		c.err = r.eng.Commit(context.WithoutCancel(ctx), st.value, commits)
	}()
}

// finishCommit waits for the running commit, if any, and tells observers
// what its plans did once it is committed.
func (r *Runtime) finishCommit(st *leaderState) error {
	c := st.committing
	if c == nil {
		return nil
	}
	<-c.done
	st.committing = nil
	if c.err != nil {
		return c.err // cursors stay; the next holder state starts from Redis's
	}
	for _, p := range c.plans {
		p.report(r.emit)
	}
	return nil
}

// flushCommits commits whatever was enqueued and not yet committed, before
// the state is dropped or the lease handed over, and returns the first
// commit's error.
func (r *Runtime) flushCommits(ctx context.Context, st *leaderState) error {
	err := r.finishCommit(st)
	if len(st.uncommitted) > 0 {
		r.startCommit(ctx, st)
		err = cmp2(err, r.finishCommit(st))
	}
	return err
}

// enqueueAll enqueues every planned slot, several schedules at once. Each
// schedule's slots go in order, and a schedule stops at its first failure
// so its cursor never passes an un-enqueued slot.
//
// The slots go in rounds: the first slot of every plan together, handed to
// the pipeline a chunk of roundChunk at a time (a script each), then every
// plan's second, and so on; a spike is one round. A
// schedule that skips overlapping runs asks Redis about its previous run
// before each slot, so those go one plan at a time, EnqueueConcurrency of
// them at once, beside the rounds.
//
// Every enqueue is fenced (fence.Term): the engine runs it only while the
// lease holds this holder's value, so one that arrives after a takeover (a
// held connection, a pause after the check below) is refused, not run
// twice.
func (r *Runtime) enqueueAll(ctx context.Context, fence *engine.Fence, plans []*slotPlan) {
	var rounds, alone []*slotPlan
	for _, p := range plans {
		switch {
		case len(p.enqueue) == 0:
		case p.sched.Overlap != registry.OverlapAllow:
			alone = append(alone, p)
		default:
			rounds = append(rounds, p)
		}
	}
	var wg sync.WaitGroup
	work := make(chan *slotPlan)
	for range min(r.opts.EnqueueConcurrency, len(alone)) {
		wg.Go(func() {
			for p := range work {
				r.enqueuePlan(ctx, fence, p)
			}
		})
	}
	wg.Go(func() {
		for _, p := range alone {
			work <- p
		}
		close(work)
	})
	r.enqueueRounds(ctx, fence, rounds)
	wg.Wait()
}

// enqueueRounds enqueues the k-th slot of every plan in round k. A round's
// slots go to the pipeline a chunk at a time, as soon as the chunk is
// prepared, so Redis runs one chunk while the next is prepared.
func (r *Runtime) enqueueRounds(ctx context.Context, fence *engine.Fence, plans []*slotPlan) {
	roundChunk, chunksInFlight := r.roundChunks()
	for k := 0; len(plans) > 0; k++ {
		var wg sync.WaitGroup
		inFlight := make(chan struct{}, chunksInFlight)
		send := func(slots []slotEnqueue, items []engine.Enqueue) {
			if len(slots) == 0 {
				return
			}
			inFlight <- struct{}{}
			wg.Go(func() {
				defer func() { <-inFlight }()
				// Each plan has one slot in a round: no two goroutines
				// finish slots of one plan.
				for i, res := range r.eng.EnqueueAll(ctx, fence, items) {
					r.finishSlot(fence, slots[i], res)
				}
			})
		}
		// A chunk's slots and their tasks are allocated once, at most a
		// chunk's size, not grown by appending: every garbage collection
		// a slot sets off takes CPU from its enqueues (and from Redis
		// when the two share cores).
		var slots []slotEnqueue
		var items []engine.Enqueue
		for i, p := range plans {
			se, item, ok := r.prepareSlot(ctx, fence, p, k)
			if !ok || !se.send {
				continue
			}
			if slots == nil {
				n := min(roundChunk, len(plans)-i)
				slots, items = make([]slotEnqueue, 0, n), make([]engine.Enqueue, 0, n)
			}
			slots, items = append(slots, se), append(items, item)
			if len(slots) == roundChunk {
				send(slots, items)
				slots, items = nil, nil
			}
		}
		send(slots, items)
		wg.Wait()
		next := plans[:0]
		for _, p := range plans {
			if p.err == nil && k+1 < len(p.enqueue) {
				next = append(next, p)
			}
		}
		plans = next
	}
}

// roundChunk is the slots handed to the pipeline at once, a script's
// worth (pipeline's taskChunk); roundChunksInFlight bounds those waiting
// for their reply. An engine may ask for others (engine.EnqueueBatches).
const (
	roundChunk          = 128
	roundChunksInFlight = 4
)

// roundChunks is the size of a round's chunks and how many may wait for
// their reply: the engine's, if it says, else roundChunk and
// roundChunksInFlight.
func (r *Runtime) roundChunks() (size, inFlight int) {
	if b, ok := r.eng.(engine.EnqueueBatches); ok {
		if size, inFlight = b.EnqueueBatches(); size > 0 && inFlight > 0 {
			return size, inFlight
		}
	}
	return roundChunk, roundChunksInFlight
}

// enqueuePlan enqueues a plan's slots one after another.
func (r *Runtime) enqueuePlan(ctx context.Context, fence *engine.Fence, p *slotPlan) {
	for k := range p.enqueue {
		se, item, ok := r.prepareSlot(ctx, fence, p, k)
		if !ok {
			return
		}
		if !se.send {
			continue
		}
		if !r.finishSlot(fence, se, r.eng.EnqueueAll(ctx, fence, []engine.Enqueue{item})[0]) {
			return
		}
		if se.replaces != "" {
			r.replaceRunning(ctx, p.sched, se.replaces, se.occ)
		}
	}
}

// slotEnqueue is one slot on its way into asynq.
type slotEnqueue struct {
	plan *slotPlan
	k    int // the slot's index in plan.enqueue
	occ  registry.Occurrence
	send bool // false: not enqueued (skipped, buffered, lost), and recorded already
	// replaces is the running occurrence that overlap=replace cancels
	// once this one is in, "" for none.
	replaces string
	// enqueued is the EnqueueObserver's done, nil without one.
	enqueued func(inserted bool, err error)
}

// prepareSlot decides what becomes of a plan's k-th slot before its
// enqueue, and returns the task to send when se.send. It reports false
// when the plan stops there (failedAt), and records a slot that is not
// enqueued (skipped or lost) at once.
func (r *Runtime) prepareSlot(ctx context.Context, fence *engine.Fence, p *slotPlan, k int) (se slotEnqueue, item engine.Enqueue, ok bool) {
	s, slot := p.sched, p.enqueue[k]
	// A zombie that wakes after its lease expired stops here; if it
	// slipped past this check, the fence makes Redis refuse its enqueue.
	if fence.Rejected() {
		p.failedAt(k, engine.ErrNotLeader)
		return slotEnqueue{}, engine.Enqueue{}, false
	}
	if v, held := r.eng.Current(); !held || v != fence.Term {
		p.failedAt(k, errTermNotTrusted)
		return slotEnqueue{}, engine.Enqueue{}, false
	}
	outcome, replaces, reason := OutcomeEnqueued, "", ""
	switch s.Overlap {
	case registry.OverlapSkip:
		busy, err := r.previousStillRunning(ctx, s, p.lastID())
		if err != nil {
			p.failedAt(k, err)
			return slotEnqueue{}, engine.Enqueue{}, false
		}
		if busy {
			outcome = OutcomeSkipped
		}
	case registry.OverlapBufferOne, registry.OverlapReplace:
		v, err := r.overlapDecision(ctx, p, slot)
		if err != nil {
			p.failedAt(k, err)
			return slotEnqueue{}, engine.Enqueue{}, false
		}
		outcome, replaces, reason = v.outcome, v.replaces, v.reason
	}
	occ := p.occurrence(r.opts.Namespace, slot)
	if outcome == OutcomeEnqueued {
		if err := r.checkInDoubt(ctx, s, occ); err != nil {
			p.failedAt(k, err)
			return slotEnqueue{}, engine.Enqueue{}, false
		}
	}
	se = slotEnqueue{plan: p, k: k, occ: occ, replaces: replaces}
	if outcome != OutcomeEnqueued {
		p.recordSlot(occ, outcome, r.clock.Now())
		p.done[len(p.done)-1].Error = reason
		return se, engine.Enqueue{}, true
	}
	// The cursor rises to the slot in the enqueue's own script, so a crash
	// before the commit leaves no enqueued slot after the cursor for the
	// next holder to enqueue again once the task's ID is free.
	var mark engine.CursorMark
	retention := r.retention(s, slot)
	if p.scope.Member == "" {
		mark = engine.CursorMark{Schedule: s.Name, Slot: slot.Unix()}
		if s.Overlap != registry.OverlapAllow {
			// Its next slot asks whether this one still runs.
			mark.LastID = occ.ID
		}
	} else {
		// A family member's cursor is not a number in the schedules'
		// cursor hash (store/members.go), so no mark raises it with the
		// enqueue: its task ID stays reserved for as long as the next
		// holder could enqueue the slot again, as every schedule's did
		// before marks.
		retention = r.memberRetention(s, slot)
	}
	se.send = true
	carrier, enqueued := r.beforeEnqueue(ctx, s, occ)
	se.enqueued = enqueued
	return se, engine.Enqueue{Task: r.task(s, occ, carrier, retention), Cursor: mark}, true
}

// finishSlot takes a slot's enqueue result: it records the slot, or cuts
// the plan at it and reports false.
func (r *Runtime) finishSlot(fence *engine.Fence, se slotEnqueue, res engine.Result) bool {
	r.inDoubt.noteEnqueue(se.occ.ID, res.Err, res.Unacked, r.clock.Now())
	if err := res.Err; err != nil {
		if fence.Rejected() {
			err = engine.ErrNotLeader
		} else {
			err = fmt.Errorf("enqueue %s: %w", se.occ.ID, err)
		}
		if se.enqueued != nil {
			se.enqueued(false, err) // ErrPausesChanged included: the observer tells it from a failure
		}
		if errors.Is(err, engine.ErrPausesChanged) {
			// Nothing failed: the plan stops before the slot, whose
			// cursor stays, and the next step plans it again with the
			// pauses read anew.
			err = nil
		}
		se.plan.failedAt(se.k, err)
		return false
	}
	if se.enqueued != nil {
		se.enqueued(res.Inserted, nil)
	}
	se.plan.recordSlot(se.occ, OutcomeEnqueued, r.clock.Now())
	return true
}

// enqueue puts one occurrence into asynq and reports whether it inserted
// it. A task ID conflict means another replica (or an earlier attempt of
// this one, or a double-submitted trigger) already enqueued it: success,
// with nothing inserted.
func (r *Runtime) enqueue(ctx context.Context, s *registry.Schedule, occ registry.Occurrence, retention time.Duration) (inserted bool, err error) {
	carrier, enqueued := r.beforeEnqueue(ctx, s, occ)
	res := r.eng.EnqueueAll(ctx, nil, []engine.Enqueue{{Task: r.task(s, occ, carrier, retention)}})[0]
	inserted, err = res.Inserted, res.Err
	if err != nil {
		inserted, err = false, fmt.Errorf("enqueue %s: %w", occ.ID, err)
	}
	if enqueued != nil {
		enqueued(inserted, err)
	}
	return inserted, err
}

// task is an occurrence's task, sent with the enqueues of other schedules
// due at the same moment (the engine's EnqueueAll). The observer's
// carrier, if any, goes in its headers.
func (r *Runtime) task(s *registry.Schedule, occ registry.Occurrence, carrier map[string]string, retention time.Duration) engine.Task {
	return engine.Task{Type: s.Name, Payload: registry.EncodeOccurrence(occ), ID: occ.ID,
		Queue: s.Queue, MaxRetry: s.MaxRetry, Timeout: s.Timeout, Retention: retention, Headers: carrier}
}

// previousStillRunning reports whether the schedule's last enqueued
// occurrence is still pending, scheduled, active or waiting to retry.
func (r *Runtime) previousStillRunning(ctx context.Context, s *registry.Schedule, lastInBatch string) (bool, error) {
	id := lastInBatch
	if id == "" && s.Family() {
		return false, nil // a member's previous occurrence comes with its plan (prevID)
	}
	if id == "" {
		var err error
		if id, err = r.eng.LastID(ctx, s.Name); err != nil || id == "" {
			return false, err
		}
	}
	return r.eng.TaskRunning(ctx, s.Queue, id)
}
