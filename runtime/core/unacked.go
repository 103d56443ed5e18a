package core

import (
	"context"
	"sync"
	"time"

	"github.com/belfry/belfry/registry"
)

// Enqueues in doubt. An enqueue that the engine ran but did not make
// durable in time (on Redis with replica acks: no replica acknowledged it)
// has failed for the scheduler, yet its task is in, where a worker may take
// it. The leader remembers such IDs, and before it tries one again it looks
// for its task: still there, the retry conflicts and is acknowledged in
// turn; gone, a failover lost the write. The task is then enqueued again,
// under the same ID and fenced by the current term as every enqueue is: no
// attempt of it can have started, since a worker runs an attempt only once
// a replica acknowledged its start mark, written in the task's own hash —
// replication being in order, an acknowledged mark would have kept the
// task too — and a worker that took the task from the old primary and
// finds it gone when it marks the start runs it only if it comes back,
// marked as that worker's, which the new task's delivery then waits for.
// The engine keeps a finished task's
// ID reserved while its slot may still be retried (EnqueuesInDoubt), so a
// task that ran and finished is found, not taken for lost. Only the replica
// that made the write knows it is in doubt: a takeover by another replica
// in between enqueues the slot as usual, which the same reasoning makes
// safe.
type inDoubt struct {
	mu  sync.Mutex
	ids map[string]time.Time
}

// inDoubtKept is how long an ID stays in doubt unresolved: far longer than
// any retry of its slot (grace), so it only bounds memory.
const inDoubtKept = time.Hour

// noteEnqueue takes an enqueue's result: not acknowledged (the flag the
// engine set, since a driver may keep only the text of an error) puts
// the ID in doubt, success resolves it.
func (d *inDoubt) noteEnqueue(id string, err error, unacked bool, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case err == nil:
		delete(d.ids, id)
	case unacked:
		if _, ok := d.ids[id]; ok {
			return
		}
		if d.ids == nil {
			d.ids = map[string]time.Time{}
		}
		for other, at := range d.ids {
			if now.Sub(at) > inDoubtKept {
				delete(d.ids, other)
			}
		}
		d.ids[id] = now
	}
}

func (d *inDoubt) has(id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.ids[id]
	return ok
}

// checkInDoubt looks for the task of occ, enqueued by this replica without
// acknowledgement, and logs when a failover lost it: the enqueue about to
// be retried puts it in again (see inDoubt).
func (r *Runtime) checkInDoubt(ctx context.Context, s *registry.Schedule, occ registry.Occurrence) error {
	if !r.inDoubt.has(occ.ID) {
		return nil
	}
	in, err := r.eng.TaskExists(ctx, s.Queue, occ.ID)
	if in || err != nil {
		return err
	}
	r.log.Warn("a failover lost the enqueue of an occurrence before a replica acknowledged it and before any attempt started; enqueuing it again",
		"id", occ.ID, "slot", occ.Slot.UTC())
	return nil
}
