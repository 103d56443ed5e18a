package runtime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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
// have run (from about two lease TTLs before it noticed, when the loss was
// at the latest, to the new cursors), in the log, the admin, health and
// metrics. A replica that starts after the loss has nothing to compare and
// notices nothing; the slots then start from now, as for a new schedule.

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
}

// observe compares the store's epoch and the lease's token with what this
// replica saw before and returns why writes were lost, or "".
// Tokens only grow (INCR); a holder that resumes its own lease keeps its
// value, so the same token is a loss only under another value.
func (w *dataWatch) observe(epoch, value string, token int64) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var lost string
	switch {
	case w.epoch != "" && epoch != w.epoch:
		lost = "Redis lost its data (the store's epoch is gone: FLUSHALL, a restart without persistence, or eviction)"
	case token < w.highToken || (token == w.highToken && value != w.value):
		lost = fmt.Sprintf("Redis lost acknowledged writes (the fencing token went back from %d to %d: a failover to a replica that was behind?)",
			w.highToken, token)
	}
	w.epoch = epoch
	if token >= w.highToken {
		w.highToken, w.value = token, value
	}
	return lost
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
	if r.dataWatch.known() {
		return
	}
	if epoch, err := r.store.CurrentEpoch(ctx); err == nil && epoch != "" {
		r.dataWatch.learn(epoch)
	}
}

func newEpoch() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// checkLostWrites runs when this replica gains the lease. It returns the
// cursor every schedule must start from after a loss, or the zero time.
func (r *Runtime) checkLostWrites(ctx context.Context, value string) (time.Time, error) {
	epoch, _, err := r.store.Epoch(ctx, value, newEpoch())
	if err != nil {
		return time.Time{}, err
	}
	_, token := lease.ParseValue(value)
	reason := r.dataWatch.observe(epoch, value, token)
	if reason == "" {
		return time.Time{}, nil
	}
	// Another replica may have found this loss first (this one knew the
	// old epoch or a higher token as a follower): then the cursors are
	// already past it.
	if seen, err := r.store.Lost(ctx); err == nil && len(seen) > 0 && seen[0].Epoch == epoch && seen[0].Token > 0 && seen[0].Token <= token {
		return time.Time{}, nil
	}
	now, err := r.store.Time(ctx)
	if err != nil {
		return time.Time{}, err
	}
	resume := now.Add(r.opts.SkewMargin).Truncate(time.Second).Add(time.Second) // rounded up
	l := store.LostWrites{At: now.UnixMilli(), Replica: r.opts.Replica, Reason: reason,
		From: now.Add(-2 * r.opts.LeaseTTL).Unix(), To: resume.Unix(), Epoch: epoch, Token: token}
	r.log.Error("lost writes detected: "+reason+"; slots in the window may not have run, and none runs twice",
		"from", time.Unix(l.From, 0).UTC(), "to", resume.UTC())
	if err := r.store.RecordLost(ctx, l); err != nil {
		r.log.Warn("could not record the lost writes", "err", err)
	}
	r.emit(Event{Outcome: OutcomeLost})
	return resume, nil
}

// LostWrites returns the losses of Redis data detected, newest first.
func (r *Runtime) LostWrites(ctx context.Context) ([]LostWrites, error) {
	if r.disabled != "" {
		return nil, nil
	}
	stored, err := r.store.Lost(ctx)
	out := make([]LostWrites, len(stored))
	for i, l := range stored {
		out[i] = LostWrites{At: unixMilli(l.At), Replica: l.Replica, Reason: l.Reason,
			From: time.Unix(l.From, 0).UTC(), To: time.Unix(l.To, 0).UTC()}
	}
	return out, err
}
