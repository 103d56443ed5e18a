package core

import (
	"context"
	"maps"
	"sync"
	"time"
	"unicode/utf8"

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
// run, the caller's). The carrier it returns is what the engine carries
// with the task, beside its payload: asynq's task headers, where
// messaging conventions put trace context. A worker's middleware reads it
// with Carrier. A nil or empty carrier leaves the task as it is without an
// observer. Keys and values must be valid UTF-8 (a carrier that is not is
// not carried); the runtime reads the carrier until it calls done, so the
// observer must not change it before then. The runtime then calls done,
// when not nil, exactly once: inserted is true when the task went in;
// false with a nil err when the occurrence was already there (its task ID
// taken, by another replica, an earlier attempt or a double submit), which
// is no failure; or err says why the enqueue failed — but ErrPausesChanged,
// no failure either: nothing went in, and the leader plans the occurrence
// again at once, so BeforeEnqueue may be called for it a second time.
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
// enqueued, and returns what its task carries beside the payload and the
// observer's done (both nil without one). Without an observer it costs a
// comparison: nothing is allocated per occurrence.
func (r *Runtime) beforeEnqueue(ctx context.Context, s *registry.Schedule, occ registry.Occurrence) (carrier map[string]string, done func(inserted bool, err error)) {
	if r.opts.EnqueueObserver == nil {
		return nil, nil
	}
	carrier, done = r.opts.EnqueueObserver.BeforeEnqueue(ctx, s, occ)
	if !carriable(carrier) {
		carrier = nil // the task goes in without it rather than not at all
	}
	return carrier, done
}

// carriable reports whether asynq can carry the carrier as task headers,
// which are protobuf strings.
func carriable(carrier map[string]string) bool {
	for k, v := range carrier {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return false
		}
	}
	return true
}

// carrierKey is the context key of the carrier a task came with.
type carrierKey struct{}

// Carrier returns what the enqueue's EnqueueObserver asked the engine to
// carry with the task whose handler runs with ctx (for asynq, the task's
// headers), or nil: a task enqueued without an observer, or a context that
// is not a handler's. It is a copy, the caller's to keep or change. The
// worker wiring (runtime.RegisterHandlers, WithCarrier) puts it in the context before any
// middleware runs; package runtime/otelbelfry reads the enqueue's trace
// context from it.
func Carrier(ctx context.Context) map[string]string {
	carrier, _ := ctx.Value(carrierKey{}).(map[string]string)
	return maps.Clone(carrier)
}

// WithCarrier returns ctx carrying the carrier a task came with (for
// asynq, its headers), for Carrier to read: an engine's worker wiring
// calls it before the handler and its middleware run. An empty carrier
// costs nothing.
func WithCarrier(ctx context.Context, carrier map[string]string) context.Context {
	if len(carrier) == 0 {
		return ctx
	}
	return context.WithValue(ctx, carrierKey{}, carrier)
}
