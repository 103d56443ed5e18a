package core

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/engine"
)

// Enqueues in doubt. An enqueue that the engine ran but did not make
// durable in time (on Redis with runtime.Options.ReplicaAcks: no replica
// acknowledged it) has failed for the scheduler, yet its task is in, where
// a worker may take it and run it. If a failover then loses the task, a
// plain retry would insert it again and run the slot a second time. So the
// leader remembers such IDs, and before it tries one again it looks for its
// task: still there, the retry conflicts and is acknowledged in turn; gone,
// the write was lost, the slot may or may not have run, and it is recorded
// as a one-slot loss (the occurrence's outcome "lost", a LostWrites window,
// the log), not enqueued again. Only the replica that made the write knows
// it is in doubt: a takeover by another replica in between enqueues the
// slot as usual.
type inDoubt struct {
	mu  sync.Mutex
	ids map[string]*doubt
}

type doubt struct {
	at   time.Time
	gone bool // the loss is recorded; the slot stays lost
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
	case unacked && d.ids[id] == nil:
		if d.ids == nil {
			d.ids = map[string]*doubt{}
		}
		for other, od := range d.ids {
			if now.Sub(od.at) > inDoubtKept {
				delete(d.ids, other)
			}
		}
		d.ids[id] = &doubt{at: now}
	}
}

func (d *inDoubt) get(id string) (doubt, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if od := d.ids[id]; od != nil {
		return *od, true
	}
	return doubt{}, false
}

func (d *inDoubt) markGone(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if od := d.ids[id]; od != nil {
		od.gone = true
	}
}

// unackedGone reports whether occ's task, enqueued by this replica without
// acknowledgement, is gone (see inDoubt), recording the loss the first time.
func (r *Runtime) unackedGone(ctx context.Context, s *registry.Schedule, occ registry.Occurrence) (bool, error) {
	d, ok := r.inDoubt.get(occ.ID)
	if !ok {
		return false, nil
	}
	if d.gone {
		return true, nil
	}
	if in, err := r.eng.TaskExists(ctx, s.Queue, occ.ID); in || err != nil {
		return false, err
	}
	reason := fmt.Sprintf("the enqueue of %s, which was not acknowledged as durable, is gone (a failover lost it): it may have run before, so it is not enqueued again", occ.ID)
	now := r.clock.Now()
	if err := r.eng.RecordLost(ctx, engine.LostWrites{At: now.UnixMilli(), Replica: r.opts.Replica, Reason: reason,
		From: occ.Slot.Unix(), To: occ.Slot.Unix()}); err != nil {
		return false, err
	}
	r.log.Error("lost writes detected: "+reason, "slot", occ.Slot.UTC())
	r.inDoubt.markGone(occ.ID)
	return true, nil
}
