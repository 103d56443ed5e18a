package core

import (
	"context"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/engine"
)

// Attempts delivered twice. An engine may deliver one attempt of a task to
// two workers (asynq's dequeue, lost in a Redis failover that kept the
// enqueue, hands the attempt to a second worker while the first runs it).
// Such an engine is an engine.Starts: before the handler runs, the
// Middleware asks it to start the attempt, and a delivery whose attempt
// another delivery ran does not run the handler: it ends as that one
// did. The Redis engine does this with start marks when its replica acks
// are on (runtime.Options.ReplicaAcks; runtime/internal/redisengine/start.go
// says how, and what remains).

// ErrDeliveredTwice is in the error of a delivery that did not run its
// attempt because another delivery of the same attempt ran it and failed
// (a failover delivered it twice; see runtime.Options.ReplicaAcks on
// Redis). The error tells the engine's workers to treat the task as the
// other delivery's failure did (on Redis, an asynq ErrorHandler can tell
// such a delivery from a handler's failure).
var ErrDeliveredTwice = engine.ErrDeliveredTwice

// attemptStart is this delivery's hold on its attempt; its methods do
// nothing when it holds none.
type attemptStart struct {
	r     *Runtime
	claim engine.Claim
}

// startAttempt asks the engine to start the attempt of ctx's task. It
// returns this delivery's hold when it is to run the attempt, the engine's
// answer (Elsewhere with the other delivery's verdict when another ran it),
// or an error when the engine took no claim before ctx ended.
func (r *Runtime) startAttempt(ctx context.Context, attempt int) (hold attemptStart, s engine.Start, err error) {
	hold.r = r
	starts, ok := r.eng.(engine.Starts)
	if !ok {
		return hold, s, nil
	}
	if s, err = starts.StartAttempt(ctx, attempt); err != nil || s.Elsewhere {
		return hold, s, err
	}
	if s.Claim != nil {
		r.marks.Add(1)
		hold.claim = s.Claim
	}
	return hold, s, nil
}

// keepAlive holds the claim while the handler runs, until stop.
func (h attemptStart) keepAlive(ctx context.Context) (stop func()) {
	if h.claim == nil {
		return func() {}
	}
	return h.claim.KeepAlive(ctx)
}

// finish records how the attempt ended, and lets Close stop waiting for
// it.
func (h attemptStart) finish(ctx context.Context, handlerErr error) {
	if h.claim == nil {
		return
	}
	defer h.r.marks.Add(-1)
	h.claim.Finish(ctx, handlerErr)
}

// marksWait bounds how long Close waits for the ends of attempts: their
// claims' last writes, after a worker's shutdown cancelled them.
const marksWait = 2 * time.Second

// waitMarks waits, up to marksWait, until every attempt this runtime's
// workers claimed has recorded its end.
func (r *Runtime) waitMarks() {
	for deadline := time.Now().Add(marksWait); r.marks.Load() > 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	for deadline := time.Now().Add(checkpointGrace); r.checkpoints.Load() > 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
}

// attemptOf is the worker's attempt of the task in ctx (0 for the first)
// and the retries it has, the schedule's own when the engine does not say.
func (r *Runtime) attemptOf(ctx context.Context, s *registry.Schedule) (attempt, maxRetry int) {
	maxRetry = s.MaxRetry
	if r.deliveries == nil {
		return 0, maxRetry
	}
	attempt, m, known := r.deliveries.Attempt(ctx)
	if known {
		maxRetry = m
	}
	return attempt, maxRetry
}

// skipsRetry says whether a handler's error asks the engine's queue not to
// retry.
func (r *Runtime) skipsRetry(err error) bool {
	return r.deliveries != nil && r.deliveries.SkipsRetry(err)
}
