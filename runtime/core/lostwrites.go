package core

import (
	"context"
	"time"

	"github.com/belfry/belfry/runtime/engine"
)

// Lost writes. An engine can lose acknowledged data without an error
// (Redis: FLUSHALL, a restart without persistence, eviction, a Sentinel
// failover to a replica that was behind). The cursors may then be behind
// the slots already enqueued (whose task IDs may be gone too), and
// scheduling from them would run those slots again. The engine finds the
// loss (engine.Losses: the Redis engine compares the store's epoch and the
// fencing tokens with what this replica saw before); the leader then moves
// every cursor to the engine's clock plus SkewMargin — no slot that any
// replica may already have enqueued runs again — and records the window of
// slots that may not have run (from the longest grace, at least two lease
// TTLs, plus SkewMargin before the store was last seen intact — a slot
// that old may still have been waiting for a leader that could not write —
// to the new cursors), in the log, the admin, health and metrics. A loss a
// follower saw and nobody recorded, it records (reportLossSeen).

// LostWrites is a detected loss of Redis data.
type LostWrites struct {
	At      time.Time `json:"at"`
	Replica string    `json:"replica"`
	Reason  string    `json:"reason"`
	// Slots from From to To may not have run: the loss happened in this
	// window, and the cursors were moved past it.
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
}

// lostRecent is how long a loss makes health unhealthy.
const lostRecent = time.Hour

// reportLossSeen records a loss this replica saw as a follower that
// nobody has recorded after a while (engine.Losses.LossSeen): without this
// record the slots the loss took would be missed without a word. The
// holder's own slots from now on may already run, so the window ends
// SkewMargin after the engine's now.
func (r *Runtime) reportLossSeen(ctx context.Context) {
	losses, ok := r.eng.(engine.Losses)
	if !ok {
		return
	}
	loss, accept, err := losses.LossSeen(ctx, 2*r.opts.LeaseTTL)
	if err != nil || !loss.Found {
		return
	}
	to := resumeAfter(loss.Now, r.opts.SkewMargin)
	l := engine.LostWrites{At: loss.Now.UnixMilli(), Replica: r.opts.Replica, Reason: loss.Reason,
		From: r.lossFrom(loss.Now, loss.IntactAt).Unix(), To: to.Unix()}
	if err := r.eng.RecordLost(ctx, l); err != nil {
		r.log.Warn("could not record the lost writes", "err", err)
		return
	}
	r.log.Error("lost writes detected: "+loss.Reason+"; slots in the window may not have run, and the leader may run some again",
		"from", time.Unix(l.From, 0).UTC(), "to", to.UTC())
	r.emit(Event{Outcome: OutcomeLost})
	accept()
}

// resumeAfter is the first slot no replica may have enqueued yet, a loss
// found at the engine's now: now plus SkewMargin, rounded up to the second.
func resumeAfter(now time.Time, skewMargin time.Duration) time.Time {
	return now.Add(skewMargin).Truncate(time.Second).Add(time.Second)
}

// lossFrom is where the window of a loss found at now starts: a slot may
// have waited up to the longest grace for its enqueue when the data went,
// and the data went after intactAt, when this replica last saw the store
// intact (zero: unknown).
func (r *Runtime) lossFrom(now, intactAt time.Time) time.Time {
	since := intactAt
	if since.IsZero() || since.After(now) {
		since = now
	}
	return since.Add(-max(2*r.opts.LeaseTTL, r.longestGrace()) - r.opts.SkewMargin)
}

// learnEpoch has a follower learn what it needs of the store to find a
// loss when it leads later (engine.Losses.Learn).
func (r *Runtime) learnEpoch(ctx context.Context) {
	if losses, ok := r.eng.(engine.Losses); ok {
		losses.Learn(ctx)
	}
}

// checkLostWrites runs when this replica gains the lease. After a loss it
// returns the cursor every schedule must start from; commit must then be
// called once the cursors are moved, to record the loss and accept the new
// state. Without a loss commit only accepts it.
func (r *Runtime) checkLostWrites(ctx context.Context, value string) (resume time.Time, commit func(context.Context), err error) {
	losses, ok := r.eng.(engine.Losses)
	if !ok {
		return time.Time{}, func(context.Context) {}, nil // an engine that loses no acknowledged write
	}
	loss, accept, err := losses.FindLoss(ctx, value)
	if err != nil {
		return time.Time{}, nil, err
	}
	if !loss.Found {
		return time.Time{}, func(context.Context) { accept() }, nil
	}
	resume = resumeAfter(loss.Now, r.opts.SkewMargin)
	// The window starts as far back as a slot could still have been
	// waiting to be enqueued when the data went: a leader that could not
	// write (the engine slow, failing over, refusing unacknowledged writes)
	// left its cursors up to grace behind, and the loss took those cursors;
	// a slot older than that would have been missed anyway. The loss may
	// have been long before it was noticed (no replica that knew the store
	// led meanwhile), so grace counts back from when this replica last saw
	// the store intact.
	l := engine.LostWrites{At: loss.Now.UnixMilli(), Replica: r.opts.Replica, Reason: loss.Reason,
		From: r.lossFrom(loss.Now, loss.IntactAt).Unix(), To: resume.Unix(), Epoch: loss.Epoch, Token: loss.Token}
	commit = func(ctx context.Context) {
		r.log.Error("lost writes detected: "+loss.Reason+"; slots in the window may not have run, and none runs twice",
			"from", time.Unix(l.From, 0).UTC(), "to", resume.UTC())
		if err := r.eng.RecordLost(ctx, l); err != nil {
			r.log.Warn("could not record the lost writes", "err", err)
		}
		r.emit(Event{Outcome: OutcomeLost})
		accept()
	}
	return resume, commit, nil
}

// LostWrites returns the losses of Redis data detected, newest first.
func (d *Diagnostics) LostWrites(ctx context.Context) ([]LostWrites, error) {
	r := d.rt
	if r.eng == nil {
		return nil, nil
	}
	stored, err := bounded(ctx, r.eng.Lost)
	out := make([]LostWrites, len(stored))
	for i, l := range stored {
		out[i] = LostWrites{At: unixMilli(l.At), Replica: l.Replica, Reason: l.Reason,
			From: time.Unix(l.From, 0).UTC(), To: time.Unix(l.To, 0).UTC()}
	}
	return out, err
}

// longestGrace is the largest grace of any schedule: how long a slot may
// wait to be enqueued.
func (r *Runtime) longestGrace() time.Duration {
	var g time.Duration
	for _, s := range r.reg.Schedules() {
		g = max(g, r.grace(s))
	}
	return g
}
