package runtime

import (
	"slices"
	"sync"
	"time"
)

// unservedCheckEvery bounds how often the leader asks asynq which queues
// its servers listen to.
const unservedCheckEvery = time.Minute

// UnservedQueues returns the queues of the registry's schedules that no
// running asynq server listens to: their occurrences are enqueued and wait
// for ever, and the schedule turns late. asynq's servers announce their
// queues every few seconds, so a server that just started may not be seen
// yet.
func (r *Runtime) UnservedQueues() ([]string, error) {
	if r.disabled != "" {
		return nil, nil
	}
	servers, err := r.inspector.Servers()
	if err != nil {
		return nil, err
	}
	served := map[string]bool{}
	for _, s := range servers {
		for q := range s.Queues {
			served[q] = true
		}
	}
	var unserved []string
	for _, s := range r.reg.Schedules() {
		if !served[s.Queue] && !slices.Contains(unserved, s.Queue) {
			unserved = append(unserved, s.Queue)
		}
	}
	slices.Sort(unserved)
	return unserved, nil
}

// unservedLog logs each unserved queue once, and again once it is served.
type unservedLog struct {
	mu      sync.Mutex
	checked time.Time
	warned  map[string]bool
}

// checkUnserved is the leader's periodic look at the queues, at most once
// per unservedCheckEvery.
func (r *Runtime) checkUnserved(now time.Time) {
	u := &r.unserved
	u.mu.Lock()
	defer u.mu.Unlock()
	if now.Sub(u.checked) < unservedCheckEvery {
		return
	}
	u.checked = now
	queues, err := r.UnservedQueues()
	if err != nil {
		return // the scheduler's own calls report Redis trouble
	}
	if u.warned == nil {
		u.warned = map[string]bool{}
	}
	for q, was := range u.warned {
		if was && !slices.Contains(queues, q) {
			r.log.Info("an asynq server now serves the queue", "queue", q)
			delete(u.warned, q)
		}
	}
	for _, q := range queues {
		if !u.warned[q] {
			u.warned[q] = true
			r.log.Warn("no asynq server serves this queue: its occurrences are enqueued but never run; start workers with asynq.Config.Queues including it",
				"queue", q, "schedules", r.schedulesOn(q))
		}
	}
}

func (r *Runtime) schedulesOn(queue string) []string {
	var names []string
	for _, s := range r.reg.Schedules() {
		if s.Queue == queue {
			names = append(names, s.Name)
		}
	}
	return names
}
