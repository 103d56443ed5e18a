package runtime

import (
	"context"
	"sync"
	"time"

	"github.com/belfry/belfry/registry"
)

// Event is something this replica did: its scheduler decided a slot's fate
// (enqueued, missed, skipped, paused), an operator's occurrence was
// enqueued through it (Manual), or its worker finished an attempt
// (succeeded, retrying, failed). Each replica reports only what it did, so
// counting events across replicas counts each once.
type Event struct {
	Schedule string
	Outcome  Outcome
	// Manual marks an operator's occurrence (run now, re-run, backfill).
	Manual bool
	// Slots is how many slots the event stands for: more than one when a
	// backlog was missed at once.
	Slots int
	// Lag is, for a scheduled enqueue, how long after its slot it was
	// enqueued.
	Lag time.Duration
	// Duration is, for a finished attempt, how long it ran.
	Duration time.Duration
}

// Observe has fn called for every Event of this replica, from the goroutine
// that caused it: fn must be quick and must not block (package
// runtime/metrics counts events this way).
func (r *Runtime) Observe(fn func(Event)) {
	r.observersMu.Lock()
	defer r.observersMu.Unlock()
	r.fns = append(r.fns, fn)
}

func (r *Runtime) emit(e Event) {
	if e.Slots == 0 {
		e.Slots = 1
	}
	r.observersMu.RLock()
	defer r.observersMu.RUnlock()
	for _, fn := range r.fns {
		fn(e)
	}
}

// observers is embedded in Runtime.
type observers struct {
	observersMu sync.RWMutex
	fns         []func(Event)
}

// EnqueueObserver watches every enqueue of an occurrence: the leader's, of
// schedules and family members alike, and the operator's (Trigger, Rerun,
// Backfill and their member forms). Set it in Options.EnqueueObserver;
// package runtime/otelbelfry traces enqueues this way.
//
// The runtime calls BeforeEnqueue once it has decided to enqueue occ, an
// occurrence of s (for a family member, s is the member's schedule: the
// family's name and queue), with the context of the enqueue (for a manual
// run, the caller's), and carries the carrier it returns in the task's
// payload as occ.Trace, where the workers' middleware finds it. A nil or
// empty carrier leaves the payload as it is without an observer. The
// runtime then calls done, when not nil, exactly once: inserted is true
// when the task went in; false with a nil err when the occurrence was
// already there (its task ID taken, by another replica, an earlier attempt
// or a double submit), which is no failure; or err says why the enqueue
// failed.
//
// The leader prepares a batch of occurrences on one goroutine and sends it
// on another, so done may run on a goroutine other than BeforeEnqueue's,
// and the calls for different occurrences run concurrently: an observer
// must be safe for concurrent use. Both run on the enqueue path, where the
// leader may enqueue a hundred thousand occurrences in one slot: they must
// be quick and must not block.
type EnqueueObserver interface {
	BeforeEnqueue(ctx context.Context, s *registry.Schedule, occ registry.Occurrence) (carrier map[string]string, done func(inserted bool, err error))
}

// beforeEnqueue tells the EnqueueObserver, if any, that occ is about to be
// enqueued, and returns occ as its task carries it and the observer's done
// (nil without one). Without an observer it costs a comparison: nothing is
// allocated per occurrence.
func (r *Runtime) beforeEnqueue(ctx context.Context, s *registry.Schedule, occ registry.Occurrence) (registry.Occurrence, func(inserted bool, err error)) {
	if r.opts.EnqueueObserver == nil {
		return occ, nil
	}
	carrier, done := r.opts.EnqueueObserver.BeforeEnqueue(ctx, s, occ)
	occ.Trace = carrier
	return occ, done
}
