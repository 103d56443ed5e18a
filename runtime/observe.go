package runtime

import (
	"sync"
	"time"
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
