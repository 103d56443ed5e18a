package engine

import (
	"context"
	"errors"
)

// Starts is what an engine that may deliver one attempt of a task twice
// does about it: before a worker runs an attempt's handler, it asks the
// engine to start the attempt, and runs the handler only when the attempt
// is its own. An engine whose delivery of an attempt cannot be lost and
// repeated (a job row locked by its worker) need not have it: the core
// type-asserts it and, without it, runs every delivery.
type Starts interface {
	// StartAttempt claims attempt of the task that ctx's delivery carries.
	// It returns, when this delivery is to run the attempt, its Claim (nil
	// when the engine guards nothing here: no claim to keep or end); when
	// another delivery ran it, Start.Elsewhere with that delivery's
	// verdict; and an error when the engine took no claim before ctx
	// ended, the handler then not run.
	StartAttempt(ctx context.Context, attempt int) (Start, error)
}

// Start is the answer of Starts.StartAttempt.
type Start struct {
	// Claim is this delivery's hold on the attempt; nil when it holds
	// none or the attempt ran elsewhere.
	Claim Claim
	// Elsewhere is set when another delivery of the attempt ran it;
	// Verdict is then the error this delivery ends with, so that the
	// queue treats it as it treated the other (nil: it succeeded; else an
	// error wrapping ErrDeliveredTwice).
	Elsewhere bool
	Verdict   error
}

// Claim is a delivery's hold on its attempt while the handler runs.
type Claim interface {
	// KeepAlive holds the claim until stop is called, which waits for
	// whatever it has under way.
	KeepAlive(ctx context.Context) (stop func())
	// Finish records how the attempt ended (the handler's error), where
	// another delivery of it reads the verdict; an attempt interrupted
	// without one (ctx cancelled) is given up, for its next delivery to
	// run.
	Finish(ctx context.Context, handlerErr error)
}

// ErrDeliveredTwice is in the verdict of a delivery that did not run its
// attempt because another delivery of the same attempt ran it and failed.
var ErrDeliveredTwice = errors.New("not run: another delivery of the same attempt ran it")

// Deliveries is how the core reads a worker's delivery of a task: which
// attempt it is and how the engine's queue treats a handler's error. The
// core type-asserts it; without it every delivery is a first attempt with
// the schedule's own retries.
type Deliveries interface {
	// Attempt is the attempt of the task ctx's delivery carries (0 for
	// the first) and, when known, the retries the task has.
	Attempt(ctx context.Context) (attempt, maxRetry int, known bool)
	// SkipsRetry reports whether a handler's error asks the queue not to
	// retry the task.
	SkipsRetry(err error) bool
}
