package redisengine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/belfry/belfry/runtime/engine"
	"github.com/belfry/belfry/runtime/internal/clock"
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
// hash (pipeline.Start) and waits until a replica acknowledges the mark.
// A worker whose mark went to a primary that failed over before a replica
// had it writes it again on the new primary, where the task is pending
// again, before it runs anything; whichever delivery marks the attempt
// there first runs it. The other does not run the handler: it waits for
// the first to end and ends as it did — done if it succeeded, failed if
// it failed (so that asynq retries or archives the task as the first
// delivery's failure would have). A retry is a later attempt and runs as
// usual.
//
// The holder renews its mark while the handler runs. A delivery that finds
// the attempt held by a worker that died (or shut down: asynq puts an
// unfinished task back as it was, same attempt) runs it once the mark
// expires; a worker that shuts down and can still write removes its mark
// at once, and Close waits briefly for those writes.
//
// Without ReplicaAcks nothing is marked: a failover may lose the mark with
// the dequeue, and the handler's own idempotence (occ.Key) is the guard.
//
// A worker that cannot get its mark acknowledged (fewer replicas answer
// than ReplicaAcks asks) does not run the handler: the task's enqueue may
// be unacknowledged too, and a failover that loses it has the scheduler
// enqueue the occurrence again (core's inDoubt), which is safe only because
// no attempt runs unmarked. It waits for a replica, logging once, until the
// task's deadline, when the attempt ends unrun for asynq to retry. A Redis
// that refuses the marks to the user (NOPERM) runs the handler after the
// mark's TTL anyway, with a warning.
//
// What remains, beside that: an attempt whose worker ran the handler but lost its
// verdict in a failover before a replica had it runs again when asynq
// retries the task; and a handler that ignores its context may still be
// running when its worker, shut down, gives the attempt up.

var _ engine.Starts = (*Engine)(nil)

var _ engine.InDoubt = (*Engine)(nil)

// EnqueuesInDoubt reports whether an enqueue may be reported Unacked: with
// replica acks on.
func (e *Engine) EnqueuesInDoubt() bool { return e.acks.On() }

// startRetryMax bounds the wait between tries of a start mark: while a
// failover is under way, or another delivery of the attempt runs.
const startRetryMax = time.Second

// goneWait bounds how long a delivery whose task is gone from Redis waits
// for it to come back: long enough for a failover to complete and the old
// primary to be promoted again before it caught up, short enough not to
// hold a worker for a task's whole timeout when it never comes back (its
// occurrence inside a recorded loss's window).
const goneWait = time.Minute

// markTTLMin is the shortest a running mark lasts unless renewed.
const markTTLMin = 500 * time.Millisecond

// markTTL is how long a running mark lasts unless renewed: a lease TTL,
// the time a holder is given elsewhere, but at most a quarter of what is
// left of the task's time, so that a delivery that waits for a dead
// holder's mark to expire still has time to run the handler.
func (e *Engine) markTTL(ctx context.Context) time.Duration {
	ttl := e.leaseTTL
	if deadline, ok := ctx.Deadline(); ok {
		ttl = min(ttl, max(time.Until(deadline)/4, markTTLMin))
	}
	return ttl
}

// startMark is this delivery's claim on its attempt.
type startMark struct {
	e       *Engine
	key     string
	attempt int
	token   string
	ttl     time.Duration
}

// StartAttempt claims the attempt of ctx's task with a start mark. It
// returns the mark when this delivery is to run the attempt (no claim with
// marks off or outside asynq), the other delivery's verdict when another
// ran it, or an error when Redis took no mark before ctx ended.
func (e *Engine) StartAttempt(ctx context.Context, attempt int) (engine.Start, error) {
	id, okID := asynq.GetTaskID(ctx)
	queue, okQueue := asynq.GetQueueName(ctx)
	if !e.acks.On() || !okID || !okQueue {
		return engine.Start{}, nil
	}
	m := &startMark{e: e, key: pipeline.TaskKey(queue, id), attempt: attempt, token: RandomHex(), ttl: e.markTTL(ctx)}
	began := time.Now()
	backoff := clock.NewBackoff(50*time.Millisecond, startRetryMax)
	var digest string // of the task's message as this delivery found it
	var errLogged, unackedLogged, goneLogged bool
	for {
		s, d, err := e.acks.ClaimStart(ctx, e.Client, m.key, attempt, m.token, digest, m.ttl)
		switch {
		case errors.Is(err, pipeline.ErrNoTask):
			// The task is not in Redis: a failover lost its enqueue, or
			// the dequeue that handed it over, with the old primary. It
			// may come back — the scheduler enqueues the occurrence again
			// (core's inDoubt), or the old primary is promoted again
			// before it caught up — and this delivery then marks it and
			// runs it, once: another delivery of it waits for the mark.
			// Until then nothing runs; after goneWait, or at the task's
			// deadline, the attempt ends unrun. (A task that ran to its
			// end stays in Redis for its retention.)
			if !goneLogged {
				e.log.Warn("an attempt's task is gone from Redis (a failover lost it); it runs if it comes back",
					"task", m.key, "attempt", attempt)
				goneLogged = true
			}
			if time.Since(began) >= goneWait {
				return engine.Start{}, fmt.Errorf("attempt %d not started: its task %s is gone from Redis", attempt, m.key)
			}
		case err != nil && noPermission(err) && time.Since(began) >= m.ttl:
			// Redis refuses the mark (an ACL without the scripts'
			// rights), which no retry mends: run as without marks rather
			// than hold the task until its timeout fails it.
			e.log.Warn("running an attempt without a start mark: a failover now could run it twice",
				"task", m.key, "attempt", attempt, "err", err)
			return engine.Start{}, nil
		case err != nil && !errors.Is(err, pipeline.ErrNotAcked):
			// Redis unreachable, or refusing writes (mid-failover, or
			// min-replicas-to-write without its replicas): try again.
			if !errLogged {
				e.log.Warn("could not mark an attempt's start; trying again", "task", m.key, "attempt", attempt, "err", err)
				errLogged = true
			}
		case s.Token != m.token && s.Finished():
			return elsewhere(s, queue, id), nil
		case s.Token != m.token:
			// Another delivery runs the attempt: wait for its end.
		case err == nil:
			return engine.Start{Claim: m}, nil
		case !unackedLogged && time.Since(began) >= m.ttl:
			// The attempt does not run before a replica has its mark: a
			// failover of this primary could lose the task with the mark,
			// and the scheduler would enqueue its occurrence again
			// (core's inDoubt). It waits for a replica, or ends at the
			// task's deadline without running, for asynq to retry it.
			e.log.Warn("an attempt waits for a Redis replica to acknowledge its start mark before it runs",
				"task", m.key, "attempt", attempt, "err", err)
			unackedLogged = true
		}
		if d != "" {
			digest = d
		}
		select {
		case <-ctx.Done():
			if s.Token == m.token {
				// Not started after all: the attempt's next delivery
				// (asynq's requeue, or its retry) need not wait for the
				// mark to expire.
				m.release(ctx)
			} else if err == nil {
				err = fmt.Errorf("another delivery of the task (%s) still runs attempt %d", s.Token, s.Attempt)
			}
			return engine.Start{}, fmt.Errorf("attempt %d not started by the task's deadline (%w): %w", attempt, context.Cause(ctx), err)
		case <-time.After(backoff.Next()):
		}
	}
}

// noPermission reports whether err is Redis refusing a command to the
// client's user (its ACL): Redis's reply, whose first word says what it is.
func noPermission(err error) bool { return strings.HasPrefix(err.Error(), "NOPERM ") }

// elsewhere is the verdict of another delivery's finished mark, for asynq
// to treat this delivery as it treats that one.
func elsewhere(s pipeline.Start, queue, id string) engine.Start {
	failed := fmt.Errorf("%w, and failed (attempt %d of task %s on queue %s)", engine.ErrDeliveredTwice, s.Attempt, id, queue)
	switch s.State {
	case pipeline.StartSucceeded:
		return engine.Start{Elsewhere: true}
	case pipeline.StartFinal:
		return engine.Start{Elsewhere: true, Verdict: fmt.Errorf("%w: %w", failed, asynq.SkipRetry)}
	case pipeline.StartRevoked:
		return engine.Start{Elsewhere: true, Verdict: fmt.Errorf("%w: %w", failed, asynq.RevokeTask)}
	}
	return engine.Start{Elsewhere: true, Verdict: failed}
}

// KeepAlive renews the mark every third of its TTL until stop is called,
// which waits for the renewal under way.
func (m *startMark) KeepAlive(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(m.ttl / 3)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			ours, err := pipeline.RenewStart(ctx, m.e.Client, m.key, m.attempt, m.token, m.ttl)
			switch {
			case err != nil && ctx.Err() == nil:
				m.e.log.Debug("could not renew an attempt's start mark", "task", m.key, "err", err)
			case err == nil && !ours:
				m.e.log.Warn("an attempt's start mark expired while its handler ran: another delivery of the attempt may run it too",
					"task", m.key, "attempt", m.attempt)
				return
			}
		}
	}()
	return func() { cancel(); <-done }
}

// Finish records how the attempt ended, where a waiting second delivery
// reads it, in the terms asynq will treat the attempt in — or, for an
// attempt interrupted without a verdict (its worker shutting down, asynq
// cancelling the task), removes the mark, so that the attempt's next
// delivery runs it. It tries while Redis cannot be reached, for up to the
// mark's TTL: a second delivery that never sees the end runs the attempt
// once the mark expires.
func (m *startMark) Finish(ctx context.Context, handlerErr error) {
	var state string
	switch {
	case handlerErr == nil:
		state = pipeline.StartSucceeded
	case errors.Is(handlerErr, context.Canceled) && errors.Is(ctx.Err(), context.Canceled):
		state = "" // no verdict
	case errors.Is(handlerErr, asynq.RevokeTask):
		state = pipeline.StartRevoked
	case errors.Is(handlerErr, asynq.SkipRetry):
		state = pipeline.StartFinal
	default:
		state = pipeline.StartFailed
	}
	m.end(ctx, state, m.ttl)
}

// end writes the mark's end (state "" removes it), trying again for up to
// patience while Redis cannot be reached. A write Redis ran counts, even
// if too few replicas acknowledged it: waiting longer would hold the
// task's completion, and asynq's verdict with it, for a later failover's
// sake (docs/redis.md lists that gap).
func (m *startMark) end(ctx context.Context, state string, patience time.Duration) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), patience)
	defer cancel()
	backoff := clock.NewBackoff(50*time.Millisecond, startRetryMax)
	for tries := 1; ; tries++ {
		ours, err := m.e.acks.EndStart(ctx, m.e.Client, m.key, m.attempt, m.token, state)
		switch {
		case (err == nil || errors.Is(err, pipeline.ErrNotAcked)) && !ours && tries == 1:
			m.e.log.Warn("an attempt's start mark expired while its handler ran: another delivery of the attempt may run it too",
				"task", m.key, "attempt", m.attempt)
			return
		case err == nil || errors.Is(err, pipeline.ErrNotAcked):
			// (A later try that finds the mark gone or ended: an earlier
			// one wrote it and lost only its reply.)
			return
		}
		select {
		case <-ctx.Done():
			m.e.log.Warn("could not record the end of an attempt's start mark", "task", m.key, "attempt", m.attempt, "err", err)
			return
		case <-time.After(backoff.Next()):
		}
	}
}

// release removes the mark of an attempt that did not start.
func (m *startMark) release(ctx context.Context) {
	m.end(ctx, "", m.e.acks.Timeout)
}

// RandomHex is 16 random hex digits: an epoch, a token.
func RandomHex() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
