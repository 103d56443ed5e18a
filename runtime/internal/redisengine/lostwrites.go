package redisengine

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/belfry/belfry/runtime/engine"
	"github.com/belfry/belfry/runtime/internal/lease"
	"github.com/belfry/belfry/runtime/internal/store"
)

// Lost writes. Redis can lose acknowledged data without an error: FLUSHALL,
// a restart without persistence, eviction, a Sentinel failover to a replica
// that was behind. The cursors may then be behind the slots already
// enqueued (whose task IDs may be gone too), and scheduling from them would
// run those slots again. Each replica remembers the store's epoch (a random
// ID the first leader writes, and a leader that finds a loss writes anew)
// and the highest fencing token it has seen;
// a leader that finds the epoch gone or changed, or holds a token no larger
// than one seen before, knows writes were lost (FindLoss), and the core
// moves the cursors past the loss and records it. A replica that starts
// after the loss has nothing to compare and notices nothing; the slots
// then start from now, as for a new schedule, and a follower that knew the
// store reports the loss it saw (LossSeen).

var _ engine.Losses = (*Engine)(nil)

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
	// whose loss this replica has reported as a follower (see LossSeen).
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

// seeHolder takes the token of another replica's lease, which a follower's
// acquire found: a follower that takes over later then notices a token gone
// back. A regression seen here is left for the holder-to-be to find.
//
// Only the token is compared: a follower that knows the epoch reads it
// only when it leads, so comparing an unread epoch would take every lease
// it sees for a loss, and it would stop learning tokens.
func (e *Engine) seeHolder(value string) { e.seeLease(value, true) }

// seeHeld notes that this replica's own acquire or renewal found Redis
// holding its lease: nothing was lost up to now (a loss takes the lease
// key, or the token goes back).
func (e *Engine) seeHeld(value string) { e.seeLease(value, false) }

// seeLease notes a lease found in Redis whose token has not gone back: the
// store was intact then; learn also takes its token as the mark.
func (e *Engine) seeLease(value string, learn bool) {
	_, token := lease.ParseValue(value)
	w := &e.data
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.tokenBack(value, token) {
		if learn && w.backValue != value {
			w.backValue, w.backSince = value, e.clock.Now()
		}
		return
	}
	w.backValue = "" // a token not gone back: none is waiting for a report
	w.intactAt = e.clock.Now()
	if learn {
		w.highToken, w.value = token, value
	}
}

// intactAt is when this replica last saw the store intact.
func (w *dataWatch) intact() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.intactAt
}

// Learn has a follower read the epoch until it knows it: one GET per
// wake-up, only until the first leader has written it.
func (e *Engine) Learn(ctx context.Context) {
	if e.data.known() {
		return
	}
	if epoch, err := e.CurrentEpoch(ctx); err == nil && epoch != "" {
		e.data.learn(epoch)
	}
}

// KnowsEpoch reports whether this replica knows the store's epoch.
func (e *Engine) KnowsEpoch() bool { return e.data.known() }

// SeenToken is the highest fencing token this replica has seen.
func (e *Engine) SeenToken() int64 {
	e.data.mu.Lock()
	defer e.data.mu.Unlock()
	return e.data.highToken
}

// FindLoss reads the store's epoch (writing one if there is none) and
// compares it and the lease's token with what this replica saw before.
func (e *Engine) FindLoss(ctx context.Context, value string) (engine.Loss, func(), error) {
	epoch, _, err := e.Epoch(ctx, value, RandomHex())
	if err != nil {
		return engine.Loss{}, nil, err
	}
	_, token := lease.ParseValue(value)
	created := e.Created()
	accept := func() {
		e.data.accept(epoch, value, token)
		e.data.acceptCreated(created)
	}
	reason := e.data.check(epoch, value, token)
	// A token reissued to this replica is the first lease since the loss
	// (any other would have taken the token first), so nobody can have
	// found the loss before.
	reissued := reason == "" && e.data.reissued(value, token, created)
	if reissued {
		reason = fmt.Sprintf("Redis lost acknowledged writes (the fencing token counter went back to %d, a token this replica already held: a failover to a replica that was behind?)", token)
	}
	if reason == "" {
		return engine.Loss{}, accept, nil
	}
	// Another replica may have found this loss first (this one knew the
	// old epoch or a higher token as a follower): then the cursors are
	// already past it.
	if seen, err := e.Lost(ctx); !reissued && err == nil {
		if l, ok := NewestStoreLoss(seen); ok && l.Epoch == epoch && l.Token <= token {
			return engine.Loss{}, accept, nil
		}
	}
	now, err := e.Time(ctx)
	if err != nil {
		return engine.Loss{}, nil, err
	}
	// A new epoch, which the loss's record names: the store as it was
	// before this loss — an old primary that comes back and is promoted
	// again before it caught up — then shows as a loss of its own, by its
	// epoch, though its token may be higher than any seen since. Until
	// accept, this replica still knows the old epoch, so a failure before
	// the loss is handled finds it again.
	renewed := RandomHex()
	if err := e.ReplaceEpoch(ctx, value, renewed); err != nil {
		return engine.Loss{}, nil, err
	}
	accept = func() {
		e.data.accept(renewed, value, token)
		e.data.acceptCreated(created)
	}
	return engine.Loss{Found: true, Reason: reason, Now: now, IntactAt: e.data.intact(), Epoch: renewed, Token: token}, accept, nil
}

// LossSeen reports a loss this replica saw as a follower (a holder's token
// gone back) that nobody has recorded within wait. Its record carries no
// token, so another replica that knew the store and leads later still
// finds the loss and moves the cursors (see NewestStoreLoss), while this
// one takes the store after it as the normal (acceptReported).
func (e *Engine) LossSeen(ctx context.Context, wait time.Duration) (engine.Loss, func(), error) {
	w := &e.data
	w.mu.Lock()
	value, since, high := w.backValue, w.backSince, w.highToken
	due := value != "" && w.reportedFor != high && e.clock.Now().Sub(since) >= wait
	w.mu.Unlock()
	if !due {
		return engine.Loss{}, nil, nil
	}
	// The holder that took the lease after the loss records it when it
	// knew the store (FindLoss): then there is nothing to add.
	_, token := lease.ParseValue(value)
	epoch, err := e.CurrentEpoch(ctx)
	if err != nil {
		return engine.Loss{}, nil, err
	}
	seen, err := e.Lost(ctx)
	if err != nil {
		return engine.Loss{}, nil, err
	}
	if l, ok := NewestStoreLoss(seen); ok && l.Epoch == epoch && l.Token <= token {
		e.acceptReported(epoch, value, token, high)
		return engine.Loss{}, nil, nil
	}
	now, err := e.Time(ctx)
	if err != nil {
		return engine.Loss{}, nil, err
	}
	holder, _ := lease.ParseValue(value)
	reason := fmt.Sprintf("Redis lost acknowledged writes (the fencing token went back from %d to %d: %s leads now and did not find the loss, "+
		"as a replica started after it cannot; a FLUSHALL, or a failover to a replica that was behind?)", high, token, holder)
	accept := func() { e.acceptReported(epoch, value, token, high) }
	return engine.Loss{Found: true, Reason: reason, Now: now, IntactAt: w.intact()}, accept, nil
}

// acceptReported takes the store after a loss that is now recorded as the
// normal: were this replica to lead later, it would otherwise find the same
// loss again, record a second window over slots the holder since ran, and
// move every cursor past its own now.
func (e *Engine) acceptReported(epoch, value string, token, high int64) {
	w := &e.data
	w.accept(epoch, value, token)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.reportedFor = high
	w.intactAt = e.clock.Now()
}

// NewestStoreLoss is the newest of the losses (newest first) that took the
// store's data and moved every cursor, skipping the one-slot losses of
// enqueues in doubt that earlier versions recorded, which carry no fencing
// token: they concern one occurrence, and come after the store-wide loss
// they follow.
func NewestStoreLoss(losses []store.LostWrites) (store.LostWrites, bool) {
	for _, l := range losses {
		if l.Token > 0 {
			return l, true
		}
	}
	return store.LostWrites{}, false
}
