package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/belfry/belfry/runtime/internal/pipeline"
	"github.com/hibiken/asynq"
)

// Attempts delivered twice. asynq delivers at least once: a worker's
// dequeue, like any write, can be lost in a failover that keeps the
// enqueue, and the new primary hands the attempt, still pending there, to
// a second worker while the first has run it or is running it. With
// ReplicaAcks the runtime promises that a failover loses no occurrence it
// counted; it also keeps one from running twice this way. Before the
// handler starts, the worker marks the attempt as its own in the task's
// hash (pipeline.Start) and waits until a replica acknowledges the mark,
// so the new primary has it. A second delivery of the same attempt finds
// the mark and does not run the handler: it waits for the first to end
// and ends as it did — done if it succeeded, failed (so that asynq
// retries or archives the task as the first delivery's failure would
// have) if it failed. A retry is a later attempt and runs as usual, and so
// does the retry of an attempt whose worker died (asynq's recoverer).
//
// Without ReplicaAcks nothing is marked: a failover may lose the mark with
// the dequeue, and the handler's own idempotence (occ.Key) is the guard.
//
// The holder renews its mark while the handler runs. A delivery that finds
// the attempt held by a worker that died (or shut down: asynq puts an
// unfinished task back as it was, same attempt) runs it once the mark
// expires, a lease TTL after the last renewal; a worker that shuts down
// and can still write removes its mark at once.
//
// What remains: the worker does not run the handler until a replica has
// the mark, and records the attempt failed if that never happens before
// the task's deadline; and an attempt whose worker ran the handler to the
// end but lost its verdict in a second failover before a replica had it
// runs again when asynq retries the task, as without marks.

// startRetryMax bounds the wait between tries of a start mark: while a
// failover is under way, or another delivery of the attempt runs.
const startRetryMax = time.Second

// ranElsewhere is the verdict on an attempt another delivery of the task
// ran: nil if it succeeded.
type ranElsewhere struct{ err error }

// startMark is this delivery's claim on its attempt; nil when marks are
// off.
type startMark struct {
	r       *Runtime
	key     string
	attempt int
	token   string
}

// markStart claims the attempt of ctx's task. It returns the mark when
// this delivery is to run the attempt (nil with marks off or outside
// asynq), the other delivery's verdict when another ran it, or an error
// when no replica acknowledged the mark before ctx ended.
func (r *Runtime) markStart(ctx context.Context, attempt int) (*startMark, *ranElsewhere, error) {
	acks := r.opts.acks()
	id, okID := asynq.GetTaskID(ctx)
	queue, okQueue := asynq.GetQueueName(ctx)
	if !acks.On() || !okID || !okQueue {
		return nil, nil, nil
	}
	m := &startMark{r: r, key: pipeline.TaskKey(queue, id), attempt: attempt, token: randomHex()}
	wait := 50 * time.Millisecond
	seen := false // the task's hash was there at an earlier try
	for {
		s, err := acks.ClaimStart(ctx, r.rdb, m.key, attempt, m.token, m.ttl())
		switch {
		case errors.Is(err, pipeline.ErrNoTask) && !seen:
			// The task is gone already (the data was lost, or flushed):
			// the copy this worker holds is the only one left.
			return nil, nil, nil
		case errors.Is(err, pipeline.ErrNoTask):
			// Another delivery ran it to the end meanwhile, and asynq
			// deleted it.
			return nil, &ranElsewhere{}, nil
		case (err == nil || errors.Is(err, pipeline.ErrNotAcked)) && s.Token != m.token && s.Finished():
			return nil, elsewhere(s, queue, id), nil
		case err == nil && s.Token == m.token:
			return m, nil, nil
		}
		seen = seen || err == nil || errors.Is(err, pipeline.ErrNotAcked)
		// Not acknowledged yet, Redis unreachable mid-failover, or another
		// delivery is running the attempt: try again.
		select {
		case <-ctx.Done():
			if err == nil {
				err = fmt.Errorf("another delivery of the task (%s) is running attempt %d", s.Token, s.Attempt)
			}
			return nil, nil, fmt.Errorf("attempt %d not started by the task's deadline (%w): %w", attempt, context.Cause(ctx), err)
		case <-time.After(wait):
		}
		wait = min(2*wait, startRetryMax)
	}
}

// elsewhere is the verdict of another delivery's finished mark.
func elsewhere(s pipeline.Start, queue, id string) *ranElsewhere {
	if s.State == pipeline.StartSucceeded {
		return &ranElsewhere{}
	}
	return &ranElsewhere{err: fmt.Errorf("attempt %d of task %s on queue %s failed in another delivery of it (a failover delivered it twice)", s.Attempt, id, queue)}
}

// ttl is how long a running mark lasts unless renewed: a lease TTL, the
// time a holder is given elsewhere. A second delivery of an attempt whose
// worker died (or shut down, and asynq put the task back) runs it once the
// mark expires.
func (m *startMark) ttl() time.Duration { return m.r.opts.LeaseTTL }

// keepAlive renews the mark every third of its TTL until stop is called,
// which waits for the renewal under way.
func (m *startMark) keepAlive(ctx context.Context) (stop func()) {
	if m == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(m.ttl() / 3)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			// A renewal no replica acknowledges still reached the primary;
			// the next one tries again.
			if err := m.r.opts.acks().UpdateStart(ctx, m.r.rdb, m.key, m.attempt, m.token, pipeline.StartRunning, m.ttl()); err != nil && ctx.Err() == nil {
				m.r.log.Debug("could not renew an attempt's start mark", "task", m.key, "err", err)
			}
		}
	}()
	return func() { cancel(); <-done }
}

// finish records how the attempt ended, where a waiting second delivery
// reads it: succeeded, failed, or — interrupted without a verdict (the
// worker shutting down, or asynq cancelling the task) — no mark at all, so
// that the attempt's next delivery runs it. It tries for the mark's TTL,
// and then gives up: a second delivery that never sees the end runs the
// attempt once the mark expires.
func (m *startMark) finish(ctx context.Context, handlerErr error) {
	if m == nil {
		return
	}
	state := pipeline.StartSucceeded
	switch {
	case errors.Is(handlerErr, context.Canceled) && errors.Is(ctx.Err(), context.Canceled):
		state = ""
	case handlerErr != nil:
		state = pipeline.StartFailed
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.ttl())
	defer cancel()
	acks := m.r.opts.acks()
	wait := 50 * time.Millisecond
	for {
		err := acks.UpdateStart(ctx, m.r.rdb, m.key, m.attempt, m.token, state, m.ttl())
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			m.r.log.Warn("could not record the end of an attempt where a failover keeps it", "task", m.key, "attempt", m.attempt, "err", err)
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, startRetryMax)
	}
}
