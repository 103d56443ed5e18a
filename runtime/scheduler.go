package runtime

import (
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// maxSlotsPerDispatch bounds the slots enumerated for one schedule after a
// long outage; the rest of the backlog is counted as missed in one step.
const maxSlotsPerDispatch = 10000

// maxMissedRecords bounds the missed slots recorded one by one per dispatch
// (all of them are counted).
const maxMissedRecords = 10

// commitChunk bounds the schedules committed by one fenced script call.
const commitChunk = 500

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
	retry := newBackoff(50*time.Millisecond, 2*time.Second)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	defer r.scheduling.Store(false)
	for {
		var wait time.Duration
		value, leader := r.lease.current()
		switch {
		case !leader:
			st = nil
			// Woken when the lease changes; the cap is a backstop against
			// a missed signal and costs no Redis traffic.
			wait = r.opts.LeaseTTL / 3
		case st == nil || st.value != value:
			var err error
			if st, err = r.loadLeaderState(ctx, value); err != nil {
				st = nil
				r.noteRedis(err)
				wait = retry.next()
				break
			}
			retry.reset()
			continue
		default:
			now := r.now()
			if len(st.queue) > 0 && !st.queue[0].slot.After(now) {
				if err := r.dispatch(ctx, st, now); err != nil {
					// The cursors in Redis are the truth; what this replica
					// holds in memory may be ahead of them after a failed
					// commit, so it is rebuilt before the next attempt.
					st = nil
					if errors.Is(err, errNotLeader) {
						r.lease.stepDown("a fenced write was rejected")
						continue
					}
					r.noteRedis(err)
					wait = retry.next()
					break
				}
				retry.reset()
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
		case <-r.lease.changed:
		case <-timer.C:
		}
	}
}

// loadLeaderState reads every cursor in one round trip and starts schedules
// seen for the first time from now.
func (r *Runtime) loadLeaderState(ctx context.Context, value string) (*leaderState, error) {
	scheds := r.reg.Schedules()
	names := make([]string, len(scheds))
	for i, s := range scheds {
		names[i] = s.Name
	}
	vals, err := r.rdb.HMGet(ctx, r.keys.cursors, names...).Result()
	if err != nil {
		return nil, err
	}
	now := r.now().Truncate(time.Second)
	st := &leaderState{value: value, cursors: make(map[string]time.Time, len(scheds))}
	var fresh []any
	for i, s := range scheds {
		cursor := now
		if str, ok := vals[i].(string); ok {
			if sec, err := strconv.ParseInt(str, 10, 64); err == nil {
				cursor = time.Unix(sec, 0)
			}
		} else {
			fresh = append(fresh, s.Name)
		}
		st.cursors[s.Name] = cursor
		if next := s.Next(cursor); !next.IsZero() {
			st.queue = append(st.queue, due{s, next})
		}
	}
	heap.Init(&st.queue)
	if len(fresh) > 0 {
		args := append([]any{value, r.keys.cursors, now.Unix(), r.keys.stats}, fresh...)
		ok, err := initCursorsScript.Run(ctx, r.rdb, []string{r.keys.lease}, args...).Int()
		if err != nil {
			return nil, err
		}
		if ok != 1 {
			return nil, errNotLeader
		}
	}
	r.log.Info("scheduling", "schedules", len(scheds), "new", len(fresh))
	return st, nil
}

var errNotLeader = errors.New("lease not held")

// slotPlan is what the leader decided for one due schedule.
type slotPlan struct {
	sched   *registry.Schedule
	cursor  time.Time // the newest slot handled, committed after the enqueues
	enqueue []time.Time
	missed  []time.Time // newest last, at most maxMissedRecords
	nMissed int
	err     error // enqueue failed: the cursor stays before the failed slot
	done    []commitRec
}

type commitRec struct {
	ID      string `json:"id"`
	Slot    int64  `json:"slot"`
	Manual  string `json:"manual"`
	At      int64  `json:"at"`
	Count   int    `json:"count"`
	Outcome string `json:"outcome"`
	Score   int64  `json:"score"`
}

type commitItem struct {
	Name   string           `json:"name"`
	Cursor int64            `json:"cursor"`
	LastID string           `json:"last_id"`
	Recs   []commitRec      `json:"recs"`
	Counts map[string]int64 `json:"counts"`
}

// dispatch handles every schedule due at now: enqueue (idempotent by task
// ID), then advance the cursors in one fenced write. A crash between the two
// makes the next holder enqueue the same IDs again, which asynq rejects.
func (r *Runtime) dispatch(ctx context.Context, st *leaderState, now time.Time) error {
	var plans []*slotPlan
	for len(st.queue) > 0 && !st.queue[0].slot.After(now) {
		d := heap.Pop(&st.queue).(due)
		plans = append(plans, r.plan(d, st.cursors[d.sched.Name], now))
	}
	r.enqueueAll(ctx, st.value, plans)
	items := make([]commitItem, 0, len(plans))
	var firstErr error
	for _, p := range plans {
		if p.err != nil && firstErr == nil {
			firstErr = p.err
		}
		items = append(items, p.commitItem(now))
	}
	for start := 0; start < len(items); start += commitChunk {
		batch, err := json.Marshal(items[start:min(start+commitChunk, len(items))])
		if err != nil {
			return err
		}
		ok, err := commitScript.Run(ctx, r.rdb, []string{r.keys.lease}, st.value, r.keys.prefix,
			r.opts.HistoryLimit, int(r.ledgerTTL().Seconds()), batch).Int()
		if err != nil {
			return err // cursors stay; the next pass re-enqueues harmlessly
		}
		if ok != 1 {
			return errNotLeader
		}
	}
	for _, p := range plans {
		st.cursors[p.sched.Name] = p.cursor
		if next := p.sched.Next(p.cursor); !next.IsZero() {
			heap.Push(&st.queue, due{p.sched, next})
		}
	}
	return firstErr
}

// plan enumerates the schedule's slots in (cursor, now] and sorts them into
// enqueue and missed by the grace window.
func (r *Runtime) plan(d due, cursor, now time.Time) *slotPlan {
	s := d.sched
	p := &slotPlan{sched: s, cursor: cursor}
	oldest := now.Add(-r.grace(s))
	var stale []time.Time
	slot := d.slot
	for n := 0; !slot.IsZero() && !slot.After(now); n++ {
		if n == maxSlotsPerDispatch {
			// A backlog this long is all missed; skip to the grace window.
			p.nMissed += countSlots(s, slot, oldest)
			slot = s.AtOrAfter(oldest)
			continue
		}
		if slot.Before(oldest) {
			p.nMissed++
			stale = append(stale, slot)
			if len(stale) > maxMissedRecords {
				stale = stale[1:]
			}
		} else {
			p.enqueue = append(p.enqueue, slot)
		}
		p.cursor = slot
		slot = s.Next(slot)
	}
	if s.Misfire == registry.MisfireLatest && len(p.enqueue) == 0 && len(stale) > 0 {
		p.enqueue = []time.Time{stale[len(stale)-1]}
		stale = stale[:len(stale)-1]
		p.nMissed--
	}
	p.missed = stale
	return p
}

// countSlots counts slots from `from` (inclusive) to before `until`,
// for the rare backlog longer than maxSlotsPerDispatch.
func countSlots(s *registry.Schedule, from, until time.Time) int {
	n := 0
	for t := from; !t.IsZero() && t.Before(until); t = s.Next(t) {
		n++
	}
	return n
}

// enqueueAll enqueues every planned slot, several schedules at once. Each
// schedule's slots go in order, and a schedule stops at its first failure
// so its cursor never passes an un-enqueued slot.
func (r *Runtime) enqueueAll(ctx context.Context, leaseValue string, plans []*slotPlan) {
	work := make(chan *slotPlan)
	var wg sync.WaitGroup
	for range min(r.opts.EnqueueConcurrency, len(plans)) {
		wg.Go(func() {
			for p := range work {
				r.enqueuePlan(ctx, leaseValue, p)
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

func (r *Runtime) enqueuePlan(ctx context.Context, leaseValue string, p *slotPlan) {
	s := p.sched
	for k, slot := range p.enqueue {
		// A zombie that wakes after its lease expired stops here; if it
		// slipped past this check, the task ID makes its enqueue a no-op.
		if v, ok := r.lease.current(); !ok || v != leaseValue {
			p.err = errNotLeader
		}
		outcome := "enqueued"
		if p.err == nil && s.Overlap == registry.OverlapSkip {
			var busy bool
			if busy, p.err = r.previousStillRunning(ctx, s, p.lastID()); busy {
				outcome = "skipped"
			}
		}
		occ := s.Occurrence(slot)
		if p.err == nil && outcome == "enqueued" {
			_, p.err = r.enqueue(ctx, s, occ, r.retention(s))
		}
		if p.err != nil {
			// Keep the cursor just before the failed slot.
			if k == 0 {
				p.cursor = prevCursor(p)
			} else {
				p.cursor = p.enqueue[k-1]
			}
			p.enqueue = p.enqueue[:k]
			return
		}
		p.done = append(p.done, commitRec{ID: occ.ID, Slot: slot.Unix(), Manual: "0",
			At: r.now().UnixMilli(), Count: 1, Outcome: outcome, Score: slot.UnixMilli()})
	}
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

func (p *slotPlan) lastID() string {
	for i := len(p.done) - 1; i >= 0; i-- {
		if p.done[i].Outcome == "enqueued" {
			return p.done[i].ID
		}
	}
	return ""
}

func (p *slotPlan) commitItem(now time.Time) commitItem {
	it := commitItem{Name: p.sched.Name, Cursor: p.cursor.Unix(), Recs: p.done, Counts: map[string]int64{}}
	for _, slot := range p.missed {
		if slot.After(p.cursor) {
			continue
		}
		it.Recs = append(it.Recs, commitRec{ID: registry.OccurrenceID(p.sched.Name, slot), Slot: slot.Unix(),
			Manual: "0", At: now.UnixMilli(), Count: 1, Outcome: "missed", Score: slot.UnixMilli()})
	}
	if p.nMissed > 0 {
		it.Counts["missed"] = int64(p.nMissed)
	}
	for _, rec := range p.done {
		it.Counts[rec.Outcome]++
		if rec.Outcome == "enqueued" {
			it.LastID = rec.ID
			it.Counts["last_enqueue"] = rec.At
		}
	}
	if it.Recs == nil {
		it.Recs = []commitRec{}
	}
	return it
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
		if id, err = r.rdb.HGet(ctx, r.keys.lastID, s.Name).Result(); errors.Is(err, redis.Nil) {
			return false, nil
		} else if err != nil {
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
