package runtime

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/belfry/belfry/runtime/internal/lease"
	"github.com/belfry/belfry/runtime/internal/store"
)

// Lost writes. Redis can lose acknowledged data without an error: FLUSHALL,
// a restart without persistence, eviction, a Sentinel failover to a replica
// that was behind. The cursors may then be behind the slots already
// enqueued (whose task IDs may be gone too), and scheduling from them would
// run those slots again. Each replica remembers the store's epoch (a random
// ID the first leader writes) and the highest fencing token it has seen;
// a leader that finds the epoch gone or changed, or holds a token no larger
// than one seen before, knows writes were lost. It then moves every cursor
// to Redis's clock plus SkewMargin — no slot that any replica may already
// have enqueued runs again — and records the window of slots that may not
// have run (from the longest grace, at least two lease TTLs, plus
// SkewMargin before it noticed — a slot that old may still have been
// waiting for a leader that could not write — to the new cursors), in the
// log, the admin, health and metrics. A replica that starts after the loss has nothing to compare and
// notices nothing; the slots then start from now, as for a new schedule, and a
// follower that knew the store records the loss it saw (reportLossSeen).

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

// dataWatch is what this replica remembers of the store between leases.
type dataWatch struct {
	mu        sync.Mutex
	epoch     string
	highToken int64
	value     string // the lease value highToken came with
	// intactAt is when this replica last saw Redis still holding what it
	// knew (a lease whose token had not gone back): a loss found later
	// happened after it.
	intactAt time.Time
	// created is the lease's Created count when this replica last took
	// its own lease as the normal state (see reissued).
	created uint64
	// backValue is another replica's lease whose token had gone back,
	// seen as a follower since backSince; reportedFor is the highToken
	// whose loss this replica has reported as a follower (see
	// reportLossSeen).
	backValue   string
	backSince   time.Time
	reportedFor int64
}

// tokenBack says whether a lease's token is one a loss took back: lower
// than the highest seen, or as high under another value.
func (w *dataWatch) tokenBack(value string, token int64) bool {
	return token < w.highToken || (token == w.highToken && value != w.value)
}

// check compares the store's epoch and a lease's token with what this
// replica saw before and returns why writes were lost, or "". It changes
// nothing: accept does, once the recovery is committed, so that a failure
// on the way makes the next attempt find the loss again.
//
// Tokens only grow (INCR); a holder that resumes its own lease keeps its
// value, so the same token is a loss only under another value.
func (w *dataWatch) check(epoch, value string, token int64) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.epoch != "" && epoch != w.epoch:
		return "Redis lost its data (the store's epoch is gone: FLUSHALL, a restart without persistence, or eviction)"
	case w.tokenBack(value, token):
		return fmt.Sprintf("Redis lost acknowledged writes (the fencing token went back from %d to %d: a failover to a replica that was behind?)",
			w.highToken, token)
	}
	return ""
}

// reissued reports whether this replica's new lease carries the very
// value it held before although the lease was created anew (its token came
// from INCR, not from resuming its key): the counter went back to exactly
// the token this replica held, which check alone cannot tell from a
// resumed lease.
func (w *dataWatch) reissued(value string, token int64, created uint64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return token == w.highToken && value == w.value && created != w.created
}

// acceptCreated records the lease's Created count with an accepted lease
// of this replica's own.
func (w *dataWatch) acceptCreated(created uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.created = created
}

// accept takes the epoch and the lease as the new normal: after a handled
// loss the token may be lower than one seen before, and is the mark from
// now on.
func (w *dataWatch) accept(epoch, value string, token int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if epoch != "" {
		w.epoch = epoch
	}
	w.highToken, w.value = token, value
	w.backValue = ""
}

// seeHolder takes the token of another replica's lease, which a follower's
// acquire found: a follower that takes over later then notices a token gone
// back. A regression seen here is left for the holder-to-be to find.
//
// Only the token is compared: a follower that knows the epoch reads it
// only when it leads, so comparing an unread epoch would take every lease
// it sees for a loss, and it would stop learning tokens.
func (r *Runtime) seeHolder(value string) { r.seeLease(value, true) }

// seeHeld notes that this replica's own acquire or renewal found Redis
// holding its lease: nothing was lost up to now (a loss takes the lease
// key, or the token goes back).
func (r *Runtime) seeHeld(value string) { r.seeLease(value, false) }

// seeLease notes a lease found in Redis whose token has not gone back: the
// store was intact then; learn also takes its token as the mark.
func (r *Runtime) seeLease(value string, learn bool) {
	_, token := lease.ParseValue(value)
	w := &r.dataWatch
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.tokenBack(value, token) {
		if learn && w.backValue != value {
			w.backValue, w.backSince = value, r.clock.Now()
		}
		return
	}
	w.backValue = "" // a token not gone back: none is waiting for a report
	w.intactAt = r.clock.Now()
	if learn {
		w.highToken, w.value = token, value
	}
}

// reportLossSeen records a loss this replica saw as a follower (a holder's
// token gone back) that nobody has recorded after a while. The holder may
// be a replica with no memory of the store before the loss (one started
// after it), which has nothing to compare, finds nothing and moves no
// cursor; without this record the slots the loss took would be missed
// without a word. It carries no token, so another replica that knew the
// store and leads later still finds the loss and moves the cursors (see
// newestStoreLoss), while this one takes the store after it as the normal
// (acceptReported); the holder's own slots from now on may already run,
// so the window ends SkewMargin after Redis's now.
func (r *Runtime) reportLossSeen(ctx context.Context) {
	if r.redis == nil {
		return
	}
	w := &r.dataWatch
	w.mu.Lock()
	value, since, high := w.backValue, w.backSince, w.highToken
	due := value != "" && w.reportedFor != high && r.clock.Now().Sub(since) >= 2*r.opts.LeaseTTL
	w.mu.Unlock()
	if !due {
		return
	}
	// The holder that took the lease after the loss records it when it
	// knew the store (checkLostWrites): then there is nothing to add.
	_, token := lease.ParseValue(value)
	epoch, err := r.redis.CurrentEpoch(ctx)
	if err != nil {
		return
	}
	seen, err := r.redis.Lost(ctx)
	if err != nil {
		return
	}
	if l, ok := newestStoreLoss(seen); ok && l.Epoch == epoch && l.Token <= token {
		r.acceptReported(epoch, value, token, high)
		return
	}
	now, err := r.redis.Time(ctx)
	if err != nil {
		return
	}
	to := now.Add(r.opts.SkewMargin).Truncate(time.Second).Add(time.Second)
	holder, _ := lease.ParseValue(value)
	reason := fmt.Sprintf("Redis lost acknowledged writes (the fencing token went back from %d to %d: %s leads now and did not find the loss, "+
		"as a replica started after it cannot; a FLUSHALL, or a failover to a replica that was behind?)", high, token, holder)
	l := store.LostWrites{At: now.UnixMilli(), Replica: r.opts.Replica, Reason: reason, From: r.lossFrom(now).Unix(), To: to.Unix()}
	if err := r.redis.RecordLost(ctx, l); err != nil {
		r.log.Warn("could not record the lost writes", "err", err)
		return
	}
	r.log.Error("lost writes detected: "+reason+"; slots in the window may not have run, and the leader may run some again",
		"from", time.Unix(l.From, 0).UTC(), "to", to.UTC())
	r.emit(Event{Outcome: OutcomeLost})
	r.acceptReported(epoch, value, token, high)
}

// acceptReported takes the store after a loss that is now recorded as the
// normal: were this replica to lead later, it would otherwise find the same
// loss again, record a second window over slots the holder since ran, and
// move every cursor past its own now.
func (r *Runtime) acceptReported(epoch, value string, token, high int64) {
	w := &r.dataWatch
	w.accept(epoch, value, token)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.reportedFor = high
	w.intactAt = r.clock.Now()
}

// lossFrom is where the window of a loss found at now starts: a slot may
// have waited up to the longest grace for its enqueue when the data went,
// and the data went after this replica last saw it intact.
func (r *Runtime) lossFrom(now time.Time) time.Time {
	r.dataWatch.mu.Lock()
	since := r.dataWatch.intactAt
	r.dataWatch.mu.Unlock()
	if since.IsZero() || since.After(now) {
		since = now
	}
	return since.Add(-max(2*r.opts.LeaseTTL, r.longestGrace()) - r.opts.SkewMargin)
}

// known reports whether this replica knows the store's epoch.
func (w *dataWatch) known() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.epoch != ""
}

// learn takes the store's epoch as a follower reads it, so that a follower
// that later takes the lease notices a loss that happened before.
func (w *dataWatch) learn(epoch string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.epoch == "" {
		w.epoch = epoch
	}
}

// learnEpoch has a follower read the epoch until it knows it: one GET per
// wake-up, only until the first leader has written it.
func (r *Runtime) learnEpoch(ctx context.Context) {
	if r.redis == nil || r.dataWatch.known() {
		return
	}
	if epoch, err := r.redis.CurrentEpoch(ctx); err == nil && epoch != "" {
		r.dataWatch.learn(epoch)
	}
}

func newEpoch() string { return randomHex() }

// checkLostWrites runs when this replica gains the lease. After a loss it
// returns the cursor every schedule must start from; commit must then be
// called once the cursors are moved, to record the loss and accept the new
// state. Without a loss commit only accepts it.
func (r *Runtime) checkLostWrites(ctx context.Context, value string) (resume time.Time, commit func(context.Context), err error) {
	if r.redis == nil {
		return time.Time{}, func(context.Context) {}, nil // an engine other than Redis loses no acknowledged write
	}
	epoch, _, err := r.redis.Epoch(ctx, value, newEpoch())
	if err != nil {
		return time.Time{}, nil, err
	}
	_, token := lease.ParseValue(value)
	created := r.redis.Created()
	accept := func(context.Context) {
		r.dataWatch.accept(epoch, value, token)
		r.dataWatch.acceptCreated(created)
	}
	reason := r.dataWatch.check(epoch, value, token)
	// A token reissued to this replica is the first lease since the loss
	// (any other would have taken the token first), so nobody can have
	// found the loss before.
	reissued := reason == "" && r.dataWatch.reissued(value, token, created)
	if reissued {
		reason = fmt.Sprintf("Redis lost acknowledged writes (the fencing token counter went back to %d, a token this replica already held: a failover to a replica that was behind?)", token)
	}
	if reason == "" {
		return time.Time{}, accept, nil
	}
	// Another replica may have found this loss first (this one knew the
	// old epoch or a higher token as a follower): then the cursors are
	// already past it.
	if seen, err := r.redis.Lost(ctx); !reissued && err == nil {
		if l, ok := newestStoreLoss(seen); ok && l.Epoch == epoch && l.Token <= token {
			return time.Time{}, accept, nil
		}
	}
	now, err := r.redis.Time(ctx)
	if err != nil {
		return time.Time{}, nil, err
	}
	resume = now.Add(r.opts.SkewMargin).Truncate(time.Second).Add(time.Second) // rounded up
	// The window starts as far back as a slot could still have been
	// waiting to be enqueued when the data went: a leader that could not
	// write (Redis slow, failing over, refusing unacknowledged writes) left
	// its cursors up to grace behind, and the loss took those cursors; a
	// slot older than that would have been missed anyway. The loss may have
	// been long before it was noticed (no replica that knew the store led
	// meanwhile), so grace counts back from when this replica last saw the
	// store intact.
	l := store.LostWrites{At: now.UnixMilli(), Replica: r.opts.Replica, Reason: reason,
		From: r.lossFrom(now).Unix(), To: resume.Unix(), Epoch: epoch, Token: token}
	commit = func(ctx context.Context) {
		r.log.Error("lost writes detected: "+reason+"; slots in the window may not have run, and none runs twice",
			"from", time.Unix(l.From, 0).UTC(), "to", resume.UTC())
		if err := r.redis.RecordLost(ctx, l); err != nil {
			r.log.Warn("could not record the lost writes", "err", err)
		}
		r.emit(Event{Outcome: OutcomeLost})
		accept(ctx)
	}
	return resume, commit, nil
}

// LostWrites returns the losses of Redis data detected, newest first.
func (rd *RedisDiagnostics) LostWrites(ctx context.Context) ([]LostWrites, error) {
	r := rd.rt
	if r.redis == nil {
		return nil, nil
	}
	stored, err := bounded(ctx, r.redis.Lost)
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

// newestStoreLoss is the newest of the losses (newest first) that took the
// store's data and moved every cursor, skipping the one-slot losses of
// enqueues in doubt (unacked.go), which carry no fencing token: they
// concern one occurrence, and come after the store-wide loss they follow.
func newestStoreLoss(losses []store.LostWrites) (store.LostWrites, bool) {
	for _, l := range losses {
		if l.Token > 0 {
			return l, true
		}
	}
	return store.LostWrites{}, false
}
