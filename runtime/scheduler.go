package runtime

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/internal/clock"
	"github.com/belfry/belfry/runtime/internal/pipeline"
	"github.com/belfry/belfry/runtime/internal/store"
	"github.com/hibiken/asynq"
)

// due is a schedule's next slot in the leader's heap.
type due struct {
	sched *registry.Schedule
	slot  time.Time
}

type dueHeap []due

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].slot.Before(h[j].slot) }
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
	value   string
	cursors map[string]time.Time
	queue   dueHeap
}

// scheduleLoop runs on every replica; it only enqueues while this replica
// holds the lease. It sleeps until the next due slot, so an idle scheduler
// costs nothing, and its work grows with the schedules due, not the total.
func (r *Runtime) scheduleLoop(ctx context.Context) {
	var st *leaderState
	retry := clock.NewBackoff(50*time.Millisecond, 2*time.Second)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	defer r.scheduling.Store(false)
	for {
		var wait time.Duration
		value, leader := r.lease.Current()
		switch {
		case !leader:
			st = nil
			r.learnEpoch(ctx)
			// Woken when the lease changes; the cap is a backstop against
			// a missed signal and costs no Redis traffic.
			wait = r.opts.LeaseTTL / 3
		case st == nil || st.value != value:
			var err error
			if st, err = r.loadLeaderState(ctx, value); err != nil {
				st = nil
				r.noteRedis(err)
				wait = retry.Next()
				break
			}
			retry.Reset()
			continue
		default:
			now := r.clock.Now()
			r.checkUnserved(now)
			if len(st.queue) > 0 && !st.queue[0].slot.After(now) {
				if err := r.dispatch(ctx, st, now); err != nil {
					// The cursors in Redis are the truth; what this replica
					// holds in memory may be ahead of them after a failed
					// commit, so it is rebuilt before the next attempt.
					st = nil
					if errors.Is(err, store.ErrNotLeader) {
						r.lease.StepDown("a fenced write was rejected")
						continue
					}
					r.noteRedis(err)
					wait = retry.Next()
					break
				}
				retry.Reset()
				continue
			}
			wait = time.Hour
			if len(st.queue) > 0 {
				wait = st.queue[0].slot.Sub(now)
			}
		}
		r.scheduling.Store(st != nil)
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-r.lease.Changed():
		case <-timer.C:
		}
	}
}

// loadLeaderState reads every cursor and starts schedules seen for the
// first time from now.
func (r *Runtime) loadLeaderState(ctx context.Context, value string) (*leaderState, error) {
	scheds := r.reg.Schedules()
	resume, commitLoss, err := r.checkLostWrites(ctx, value)
	if err != nil {
		return nil, err
	}
	cursors, known, err := r.store.Cursors(ctx, r.names())
	if err != nil {
		return nil, err
	}
	now := r.clock.Now().Truncate(time.Second)
	st := &leaderState{value: value, cursors: make(map[string]time.Time, len(scheds))}
	var fresh, movedNames []string
	var moved []store.Commit
	for i, s := range scheds {
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
			moved = append(moved, store.Commit{Name: s.Name, Cursor: resume.Unix(),
				Counts: map[string]int64{counterLastResume: resume.UnixMilli()}})
		case known[i]:
			cursor = time.Unix(cursors[i], 0)
		default:
			fresh = append(fresh, s.Name)
		}
		st.cursors[s.Name] = cursor
		if next := s.Next(cursor); !next.IsZero() {
			st.queue = append(st.queue, due{s, next})
		}
	}
	heap.Init(&st.queue)
	// A schedule whose cursor the loss took is seen again from the new
	// cursor (first_seen); then every moved cursor is set.
	if err := r.store.InitCursors(ctx, value, resume.Unix(), movedNames); err != nil {
		return nil, err
	}
	if err := r.store.Commit(ctx, value, moved); err != nil {
		return nil, err
	}
	if err := r.store.InitCursors(ctx, value, now.Unix(), fresh); err != nil {
		return nil, err
	}
	// Only now is a loss handled: had a write above failed, the next
	// attempt would find the loss again and move the cursors.
	commitLoss(ctx)
	r.log.Info("scheduling", "schedules", len(scheds), "new", len(fresh))
	return st, nil
}

// dispatch handles every schedule due at now: enqueue (idempotent by task
// ID), then advance the cursors in fenced writes. A crash between the two
// makes the next holder enqueue the same IDs again, which asynq rejects.
func (r *Runtime) dispatch(ctx context.Context, st *leaderState, now time.Time) error {
	var plans []*slotPlan
	var names []string
	// A dispatch that falls behind its slots, or fails, counts toward
	// handing the lease over (handover.go).
	earliest, enqueued := st.queue[0].slot, time.Time{}
	defer func() { r.noteDispatch(ctx, earliest, enqueued) }()
	for len(st.queue) > 0 && !st.queue[0].slot.After(now) {
		d := heap.Pop(&st.queue).(due)
		plans = append(plans, planSlots(r.scope(d.sched), d.sched, d.slot, st.cursors[d.sched.Name], now, r.Grace(d.sched)))
		names = append(names, d.sched.Name)
	}
	// Pauses are read when slots come due, so a pause set on any replica
	// holds from the next slot on, whoever leads.
	pauses, err := r.store.Pauses(ctx, names)
	if err != nil {
		return err
	}
	for i, p := range pauses {
		if p != nil {
			plans[i].pause(now, r.Grace(plans[i].sched))
		}
	}
	r.enqueueAll(ctx, st.value, plans)
	enqueued = r.clock.Now()
	commits := make([]store.Commit, 0, len(plans))
	var firstErr error
	for _, p := range plans {
		if errors.Is(p.err, store.ErrNotLeader) {
			return store.ErrNotLeader // the commit would be refused too
		}
		if p.err != nil && firstErr == nil {
			firstErr = p.err
		}
		commits = append(commits, p.commit(now))
	}
	if err := r.store.Commit(ctx, st.value, commits); err != nil {
		return err // cursors stay; the next pass re-enqueues harmlessly
	}
	for _, p := range plans {
		p.report(r.emit)
	}
	for _, p := range plans {
		st.cursors[p.sched.Name] = p.cursor
		if next := p.sched.Next(p.cursor); !next.IsZero() {
			heap.Push(&st.queue, due{p.sched, next})
		}
	}
	return firstErr
}

// enqueueAll enqueues every planned slot, several schedules at once. Each
// schedule's slots go in order, and a schedule stops at its first failure
// so its cursor never passes an un-enqueued slot.
func (r *Runtime) enqueueAll(ctx context.Context, leaseValue string, plans []*slotPlan) {
	// Every enqueue is fenced: Redis runs it only while the lease holds
	// this holder's value, so one that arrives after a takeover (a held
	// connection, a pause after the check below) is refused, not run twice.
	fence := &pipeline.Fence{Key: r.store.Keys.Lease, Value: leaseValue}
	ctx = pipeline.WithFence(ctx, fence)
	work := make(chan *slotPlan)
	var wg sync.WaitGroup
	for range min(r.opts.EnqueueConcurrency, len(plans)) {
		wg.Go(func() {
			for p := range work {
				r.enqueuePlan(ctx, fence, p)
			}
		})
	}
	for _, p := range plans {
		if len(p.enqueue) > 0 {
			work <- p
		}
	}
	close(work)
	wg.Wait()
}

func (r *Runtime) enqueuePlan(ctx context.Context, fence *pipeline.Fence, p *slotPlan) {
	s := p.sched
	for k, slot := range p.enqueue {
		// A zombie that wakes after its lease expired stops here; if it
		// slipped past this check, the fence makes Redis refuse its enqueue.
		if v, ok := r.lease.Current(); !ok || v != fence.Value || fence.Rejected() {
			p.failedAt(k, store.ErrNotLeader)
			return
		}
		outcome := OutcomeEnqueued
		if s.Overlap == registry.OverlapSkip {
			busy, err := r.previousStillRunning(ctx, s, p.lastID())
			if err != nil {
				p.failedAt(k, err)
				return
			}
			if busy {
				outcome = OutcomeSkipped
			}
		}
		occ := s.Occurrence(r.opts.Namespace, slot)
		if outcome == OutcomeEnqueued {
			if gone, err := r.unackedGone(ctx, s, occ); err != nil {
				p.failedAt(k, err)
				return
			} else if gone {
				outcome = OutcomeLost
			}
		}
		if outcome == OutcomeEnqueued {
			var unacked atomic.Bool
			_, err := r.enqueue(pipeline.WithUnacked(ctx, &unacked), s, occ, r.retention(s))
			r.inDoubt.noteEnqueue(occ.ID, err, unacked.Load(), r.clock.Now())
			if err != nil {
				if fence.Rejected() {
					err = store.ErrNotLeader
				}
				p.failedAt(k, err)
				return
			}
		}
		p.done = append(p.done, store.Rec{ID: occ.ID, Slot: slot.Unix(), At: r.clock.Now().UnixMilli(),
			Outcome: string(outcome), Score: slot.UnixMilli()})
	}
}

// enqueue puts one occurrence into asynq and reports whether it inserted
// it. A task ID conflict means another replica (or an earlier attempt of
// this one, or a double-submitted trigger) already enqueued it: success,
// with nothing inserted.
func (r *Runtime) enqueue(ctx context.Context, s *registry.Schedule, occ registry.Occurrence, retention time.Duration) (inserted bool, err error) {
	task := asynq.NewTask(s.Name, registry.EncodeOccurrence(occ))
	_, err = r.client.EnqueueContext(ctx, task, asynq.TaskID(occ.ID), asynq.Queue(s.Queue),
		asynq.Timeout(s.Timeout), asynq.MaxRetry(s.MaxRetry), asynq.Retention(retention))
	switch {
	case errors.Is(err, asynq.ErrTaskIDConflict):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("enqueue %s: %w", occ.ID, err)
	}
	return true, nil
}

// previousStillRunning reports whether the schedule's last enqueued
// occurrence is still pending, scheduled, active or waiting to retry.
func (r *Runtime) previousStillRunning(ctx context.Context, s *registry.Schedule, lastInBatch string) (bool, error) {
	id := lastInBatch
	if id == "" {
		var err error
		if id, err = r.store.LastID(ctx, s.Name); err != nil || id == "" {
			return false, err
		}
	}
	info, err := r.inspector.GetTaskInfo(s.Queue, id)
	if errors.Is(err, asynq.ErrTaskNotFound) || errors.Is(err, asynq.ErrQueueNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	switch info.State {
	case asynq.TaskStateCompleted, asynq.TaskStateArchived:
		return false, nil
	}
	return true, nil
}
