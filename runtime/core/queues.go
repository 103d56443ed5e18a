package core

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/belfry/belfry/runtime/engine"
)

// unservedCheckEvery bounds how often the leader asks the engine which
// queues its workers serve.
const unservedCheckEvery = time.Minute

// Misrouted is an occurrence of this service's that workers of its queue
// could not run (see engine.Misrouted).
type Misrouted = engine.Misrouted

// queues is the engine's view of its workers' queues, nil when the engine
// has none (engine.Queues).
func (r *Runtime) queues() engine.Queues {
	if r.disabled != "" {
		return nil
	}
	q, _ := r.eng.(engine.Queues)
	return q
}

// UnservedQueues returns the queues of the registry's schedules that no
// running worker listens to: their occurrences are enqueued and wait for
// ever, and the schedule turns late. Workers announce their queues every
// few seconds, so one that just started may not be seen yet. nil when the
// engine does not say (engine.Queues).
func (d *Diagnostics) UnservedQueues() ([]string, error) {
	q := d.rt.queues()
	if q == nil {
		return nil, nil
	}
	return q.UnservedQueues(context.Background())
}

// Misrouted returns the recent reports, by workers of the schedules'
// queues, of this service's occurrences they could not run, sorted by
// schedule. nil when the engine does not say (engine.Queues).
func (d *Diagnostics) Misrouted(ctx context.Context) ([]Misrouted, error) {
	q := d.rt.queues()
	if q == nil {
		return nil, nil
	}
	return bounded(ctx, q.Misrouted)
}

// unservedLog logs each unserved queue once, and again once it is served.
type unservedLog struct {
	mu      sync.Mutex
	every   time.Duration // unservedCheckEvery; tests shorten it
	checked time.Time
	warned  map[string]bool
	// misrouted are the reports of misrouted occurrences logged.
	misrouted map[string]bool
}

// checkUnserved is the leader's periodic look at the queues, at most once
// per unservedCheckEvery: which no worker serves, and on which workers
// bounced this service's occurrences.
func (r *Runtime) checkUnserved(now time.Time) {
	q := r.queues()
	if q == nil || !r.checkQueues(now, q) {
		return
	}
	// The engine bounds its read (engine.Queues).
	r.checkMisrouted(context.Background(), q)
}

// checkQueues logs the unserved queues, and says whether it was time to.
func (r *Runtime) checkQueues(now time.Time, eng engine.Queues) bool {
	u := &r.unserved
	u.mu.Lock()
	defer u.mu.Unlock()
	if now.Sub(u.checked) < cmp.Or(u.every, unservedCheckEvery) {
		return false
	}
	u.checked = now
	queues, err := eng.UnservedQueues(context.Background())
	if err != nil {
		return false // the scheduler's own calls report the engine's trouble
	}
	if u.warned == nil {
		u.warned = map[string]bool{}
	}
	for q, was := range u.warned {
		if was && !slices.Contains(queues, q) {
			r.log.Info("a worker now serves the queue", "queue", q)
			delete(u.warned, q)
		}
	}
	for _, q := range queues {
		if !u.warned[q] {
			u.warned[q] = true
			names, more := r.schedulesOn(q, loggedNames)
			r.log.Warn("no worker serves this queue: its occurrences are enqueued but never run; "+eng.ServeAdvice(),
				"queue", q, "schedules", names, "more_schedules", more)
		}
	}
	return true
}

// loggedNames bounds the schedules a log line names: a queue of 100,000
// schedules would otherwise make one line of megabytes.
const loggedNames = 10

// schedulesOn returns up to limit names of the schedules on queue and how
// many more there are.
func (r *Runtime) schedulesOn(queue string, limit int) (names []string, more int) {
	for _, s := range r.reg.Schedules() {
		if s.Queue != queue {
			continue
		}
		if len(names) < limit {
			names = append(names, s.Name)
		} else {
			more++
		}
	}
	return names, more
}

// checkMisrouted logs each current report of a misrouted occurrence once;
// the leader calls it with its look at the queues.
func (r *Runtime) checkMisrouted(ctx context.Context, q engine.Queues) {
	ms, err := q.Misrouted(ctx)
	if err != nil {
		return
	}
	u := &r.unserved
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.misrouted == nil {
		u.misrouted = map[string]bool{}
	}
	for _, m := range ms {
		if key := m.Schedule + "|" + m.Replica + "|" + m.Reason; !u.misrouted[key] {
			u.misrouted[key] = true
			r.log.Error("MISROUTED OCCURRENCES: "+m.String(), "schedule", m.Schedule, "queue", m.Queue, "workers_namespace", m.Namespace)
		}
	}
}
