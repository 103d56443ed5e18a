package core

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/belfry/belfry/runtime/engine"
)

// A leader whose enqueues fall behind hands the lease over. Behind a slow
// link (replies that take a second or two) renewals still succeed, so the
// lease alone never moves, while each dispatch takes several round trips
// and the next slots wait behind it: lateness grows without end. So the
// leader measures each dispatch's lateness, from the slot it was for (or
// from when this replica took the lease, for the slots a takeover catches
// up) to the moment its enqueues were done, and when handoverAfter
// dispatches in a row are later than handoverBound, or one is later than
// handoverAfter times the bound, it releases the lease and stays out of
// the election for a cool-down, so another replica leads.
//
// The bound is max(2s, LeaseTTL/3): two seconds lets a per-second schedule
// fall one dispatch behind now and then (a GC pause, a busy host), and a
// third of the TTL is the time a renewal may take before it fails anyway.
// Three dispatches in a row tell a slow link from one slow reply; a single
// dispatch three bounds late is no single slow reply either (behind a slow
// link one dispatch catching up several slots takes seconds, so waiting
// for three of them would take tens).
//
// No flapping: the lease package refuses a handover when no other replica
// heartbeats (there is nobody better to lead), or while an earlier
// handover's window holds, a window that starts at handoverBase and doubles
// with each handover that follows soon after the last (up to
// handoverLimit). When every replica is slow, or Redis itself is, the
// lease changes hands after a minute, then two, then four, and a
// replica that keeps the lease logs why once.
const (
	handoverAfter      = 3
	handoverBoundFloor = 2 * time.Second
	handoverLimit      = time.Hour
)

// handoverBound is the lateness a dispatch may have before it counts as
// late.
func (r *Runtime) handoverBound() time.Duration {
	return max(handoverBoundFloor, r.opts.LeaseTTL/3)
}

// handoverBase is the first handover's window and this replica's
// cool-down: long enough for the next leader to show whether it does
// better, never shorter than a minute or four lease TTLs.
func (r *Runtime) handoverBase() time.Duration {
	return max(time.Minute, 4*r.opts.LeaseTTL)
}

// lateness is what the leader measured of its own dispatches.
type lateness struct {
	mu sync.Mutex
	// last is the newest dispatch's lateness.
	last time.Duration
	// run counts the consecutive dispatches later than the bound.
	run int
	// notBefore defers the next handover attempt after a refusal.
	notBefore time.Time
	// refused is the last refusal logged, so each is logged once.
	refused engine.HandoverOutcome
	// handovers counts the leases this replica handed over.
	handovers int
}

// noteDispatch is the scheduler's hook after a dispatch whose earliest
// slot was earliest and whose enqueues were all done at enqueued (zero
// when it failed before them: its slots are later still). It hands the
// lease over when the leader has fallen behind (see above), after flush
// has committed what the leader enqueued: its enqueues raised the cursors
// already, so the next holder never plans those slots again, and a commit
// after the release would be refused, their records and counters lost. A
// failed flush is returned and the lease kept, for the scheduler to
// rebuild its state first.
func (r *Runtime) noteDispatch(ctx context.Context, earliest, enqueued time.Time, flush func() error) error {
	if enqueued.IsZero() {
		enqueued = r.clock.Now()
	}
	from := earliest
	if since := r.eng.Since(); since.After(from) {
		from = since // a takeover's catch-up is not this leader's lateness
	}
	late := max(0, enqueued.Sub(from))
	bound := r.handoverBound()
	w := &r.lateness
	w.mu.Lock()
	w.last = late
	if late <= bound {
		w.run = 0
		w.mu.Unlock()
		return nil
	}
	w.run++
	due := (w.run >= handoverAfter || late > handoverAfter*bound) && !enqueued.Before(w.notBefore)
	run := w.run
	w.mu.Unlock()
	if !due {
		return nil
	}
	if err := flush(); err != nil {
		return err
	}
	reason := fmt.Sprintf("%d dispatches in a row enqueued more than %s after their slot, the last %s late", run, bound, late.Round(time.Millisecond))
	outcome, wait, err := r.eng.Handover(ctx, reason, r.handoverBase(), handoverLimit)
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case err != nil:
		r.noteRedis(err)
		w.notBefore = enqueued.Add(r.eng.RenewEvery())
	case outcome == engine.HandedOver:
		w.run, w.refused, w.notBefore = 0, 0, time.Time{}
		w.handovers++
		r.log.Warn("enqueues fall behind: handed the lease over to another replica",
			"lateness", late.Round(time.Millisecond), "bound", bound, "cool_down", wait)
	case outcome == engine.HandoverNotHeld:
		// It lost the lease meanwhile: nothing to hand over.
	default:
		if outcome != w.refused {
			r.log.Warn("enqueues fall behind, but this replica keeps the lease: "+outcome.String(),
				"lateness", late.Round(time.Millisecond), "bound", bound, "retry_in", wait.Round(time.Second))
		}
		w.refused = outcome
		w.notBefore = enqueued.Add(max(wait, r.eng.RenewEvery()))
	}
	return nil
}

// enqueueLateness is how late this replica's newest dispatch was enqueued
// after its slot (zero before it has led).
func (r *Runtime) enqueueLateness() time.Duration {
	r.lateness.mu.Lock()
	defer r.lateness.mu.Unlock()
	return r.lateness.last
}

// handoversForLateness counts the times this replica handed the lease over
// because its enqueues fell behind.
func (r *Runtime) handoversForLateness() int {
	r.lateness.mu.Lock()
	defer r.lateness.mu.Unlock()
	return r.lateness.handovers
}
