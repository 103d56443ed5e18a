package runtime

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// lease is this replica's view of the scheduler lease; see the package doc.
type lease struct {
	rdb     redis.UniversalClient
	keys    keys
	replica string
	ttl     time.Duration
	log     *slog.Logger
	// onRedis reports each call's outcome, for logging state changes once.
	onRedis func(err error)

	mu sync.Mutex
	// value is "<replica>|<token>" while this replica holds the lease.
	value string
	// trustedUntil is measured on the monotonic clock from the moment the
	// last successful acquire or renew was *sent*, so it never outlives the
	// key in Redis, whatever the network delay.
	trustedUntil time.Time
	// previous is the last value held, to resume after a transient error.
	previous string
	// lastHeartbeat is when this replica last recorded its heartbeat.
	lastHeartbeat time.Time

	// changed receives a signal whenever leadership is gained or lost.
	changed chan struct{}
	// wake ends a follower's wait early (a holder released the lease).
	wake chan struct{}
}

func newLease(rdb redis.UniversalClient, k keys, replica string, ttl time.Duration, log *slog.Logger, onRedis func(error)) *lease {
	return &lease{
		rdb: rdb, keys: k, replica: replica, ttl: ttl, log: log, onRedis: onRedis,
		changed: make(chan struct{}, 1), wake: make(chan struct{}, 1),
	}
}

// trustMargin is how long before the key's expiry the holder stops trusting
// its lease, absorbing clock-rate differences between this host and Redis.
func (l *lease) trustMargin() time.Duration { return l.ttl / 10 }

// renewEvery is the renewal period: two renewals can fail before the trust
// window ends, but the holder steps down at the first.
func (l *lease) renewEvery() time.Duration { return l.ttl / 3 }

// heartbeatStale is how old a heartbeat may be before the replica is
// considered gone. Replicas heartbeat about once per TTL.
func (l *lease) heartbeatStale() time.Duration { return 3 * l.ttl }

// heartbeatDue says whether this lease call should carry a heartbeat, and
// assumes it will succeed (a failed call is retried soon anyway).
func (l *lease) heartbeatDue() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if time.Since(l.lastHeartbeat) < l.ttl*9/10 {
		return "0"
	}
	l.lastHeartbeat = time.Now()
	return "1"
}

// current returns the lease value if this replica holds the lease and may
// still trust it.
func (l *lease) current() (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.value == "" {
		return "", false
	}
	if time.Now().After(l.trustedUntil) {
		return "", false
	}
	return l.value, true
}

// holding reports the value held, trusted or not (for release on shutdown).
func (l *lease) holding() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.value
}

func (l *lease) setLeader(value string, sent time.Time) {
	l.mu.Lock()
	gained := l.value != value
	// A renewal that lands after the trust window ended (the process was
	// stalled) keeps the value, but the scheduler stood down meanwhile and
	// waits for a change: wake it as for a new lease.
	lapsed := !gained && time.Now().After(l.trustedUntil)
	l.value, l.previous = value, value
	l.trustedUntil = sent.Add(l.ttl - l.trustMargin())
	l.mu.Unlock()
	if gained {
		l.log.Info("lease acquired: this replica schedules", "lease", value)
	}
	if gained || lapsed {
		signal(l.changed)
	}
}

// stepDown gives up leadership locally at once.
func (l *lease) stepDown(reason string) {
	l.mu.Lock()
	was := l.value
	l.value = ""
	l.mu.Unlock()
	if was != "" {
		l.log.Warn("lease lost: this replica stops scheduling", "lease", was, "reason", reason)
		signal(l.changed)
	}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// run keeps trying to acquire the lease and, while holding it, renews it.
func (l *lease) run(ctx context.Context) {
	go l.listenForRelease(ctx)
	backoff := newBackoff(100*time.Millisecond, 5*time.Second)
	for ctx.Err() == nil {
		var wait time.Duration
		var err error
		if value := l.holding(); value != "" {
			wait, err = l.renew(ctx, value)
		} else {
			wait, err = l.acquire(ctx)
		}
		l.onRedis(err)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			wait = backoff.next()
		} else {
			backoff.reset()
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		case <-l.wake:
			timer.Stop()
		}
	}
}

func (l *lease) acquire(ctx context.Context) (time.Duration, error) {
	l.mu.Lock()
	previous := l.previous
	l.mu.Unlock()
	sent := time.Now()
	res, err := acquireScript.Run(ctx, l.rdb, []string{l.keys.lease, l.keys.token, l.keys.replicas},
		l.replica, l.ttl.Milliseconds(), previous, l.heartbeatDue()).Slice()
	if err != nil {
		return 0, err
	}
	if len(res) != 3 {
		return 0, errors.New("acquire script: unexpected reply")
	}
	token, _ := res[0].(int64)
	value, _ := res[1].(string)
	pttl, _ := res[2].(int64)
	if token > 0 {
		l.setLeader(value, sent)
		return l.renewEvery(), nil
	}
	// Try again the moment the holder's key expires (plus a hair, so the
	// key is surely gone), but heartbeat at least once per TTL.
	wait := time.Duration(pttl)*time.Millisecond + 2*time.Millisecond
	if pttl < 0 || wait > l.ttl {
		wait = l.ttl
	}
	return wait, nil
}

func (l *lease) renew(ctx context.Context, value string) (time.Duration, error) {
	sent := time.Now()
	rctx, cancel := context.WithDeadline(ctx, sent.Add(l.ttl-l.trustMargin()))
	defer cancel()
	ok, err := renewScript.Run(rctx, l.rdb, []string{l.keys.lease, l.keys.token, l.keys.replicas},
		l.replica, l.ttl.Milliseconds(), value, l.heartbeatDue()).Int()
	switch {
	case err != nil:
		l.stepDown("renewal failed: " + err.Error())
		return 0, err
	case ok != 1:
		l.stepDown("another replica holds the lease")
		return 0, nil
	}
	l.setLeader(value, sent)
	return l.renewEvery(), nil
}

// release hands the lease over on shutdown (compare-and-DEL + publish).
func (l *lease) release(ctx context.Context) {
	value := l.holding()
	l.stepDown("shutting down")
	_, err := releaseScript.Run(ctx, l.rdb, []string{l.keys.lease, l.keys.released, l.keys.replicas},
		l.replica, value).Result()
	if err != nil {
		l.log.Warn("could not release the lease; a follower takes over when it expires", "err", err)
	}
}

// listenForRelease wakes the follower loop as soon as a holder releases the
// lease, so a graceful handover does not wait for the TTL.
func (l *lease) listenForRelease(ctx context.Context) {
	ps := l.rdb.Subscribe(ctx, l.keys.released)
	defer ps.Close()
	// go-redis pings an idle subscription every 3s by default: 20 commands a
	// minute per replica for a channel that only speeds up a graceful
	// handover (followers still retry when the key expires). Once a minute
	// is enough to notice a half-open connection.
	ch := ps.Channel(redis.WithChannelHealthCheckInterval(time.Minute))
	for {
		select {
		case <-ctx.Done():
			return
		case msg, ok := <-ch:
			if !ok {
				return
			}
			if msg.Payload != l.replica {
				signal(l.wake)
			}
		}
	}
}

// backoff is capped exponential backoff for Redis errors.
type backoff struct {
	min, max, cur time.Duration
}

func newBackoff(min, max time.Duration) *backoff { return &backoff{min: min, max: max} }

func (b *backoff) next() time.Duration {
	b.cur = min(max(b.cur*2, b.min), b.max)
	return b.cur
}

func (b *backoff) reset() { b.cur = 0 }
