package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/belfry/belfry/runtime/engine"
	"github.com/redis/go-redis/v9"
)

// Handing the lease over. A holder behind a slow link (replies that take a
// second or two, not long enough for a renewal to fail) keeps its lease
// while everything it enqueues comes later and later. Its caller measures
// that and asks Handover; the lease is then released to another replica,
// and this one stays out of the election for a cool-down.
//
// Handovers must not flap when the slowness is not this holder's (Redis
// itself is slow, or every replica's link is): the namespace remembers the
// last handover in "<lease>:handover" (a count and an until, on Redis's
// clock), and no holder hands over again before that until. Each handover
// within the memory of the previous one doubles the window, from the base
// up to the limit, so with every replica slow the lease changes hands
// after base, then 2×base, 4×base … and not on every late dispatch. The
// memory lasts four windows: after a calm stretch the count starts again.
// A holder with no other live replica (a fresh heartbeat) keeps the lease:
// handing it to nobody would stop scheduling altogether.

// HandoverOutcome says what Handover did (engine.HandoverOutcome).
type HandoverOutcome = engine.HandoverOutcome

// Handover outcomes.
const (
	HandedOver      = engine.HandedOver
	HandoverRecent  = engine.HandoverRecent
	HandoverAlone   = engine.HandoverAlone
	HandoverNotHeld = engine.HandoverNotHeld
)

// handoverScript hands the lease over if a live follower exists and no
// handover's window holds, and publishes the release so followers try at
// once.
//
//	KEYS[1] lease, KEYS[2] released channel, KEYS[3] replicas zset, KEYS[4] handover hash
//	ARGV[1] lease value, ARGV[2] replica, ARGV[3] heartbeat staleness ms,
//	ARGV[4] base window ms, ARGV[5] window limit ms
//	returns {outcome, ms}: 0 handed over (ms: the window, this replica's
//	cool-down), 1 a window holds (ms: how long it still does), 2 no other
//	live replica, 3 not the holder.
var handoverScript = redis.NewScript(`
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return {3, 0}
end
local blocked = tonumber(redis.call('HGET', KEYS[4], 'until') or '0')
if now < blocked then
  return {1, blocked - now}
end
local others = 0
for _, r in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], now - tonumber(ARGV[3]), '+inf')) do
  if r ~= ARGV[2] then
    others = others + 1
  end
end
if others == 0 then
  return {2, 0}
end
local n = tonumber(redis.call('HGET', KEYS[4], 'n') or '0') + 1
local window = math.floor(math.min(tonumber(ARGV[4]) * 2 ^ math.min(n - 1, 40), tonumber(ARGV[5])))
redis.call('HSET', KEYS[4], 'n', n, 'until', now + window, 'by', ARGV[2])
redis.call('PEXPIRE', KEYS[4], window * 4)
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', KEYS[2], ARGV[1])
return {0, window}
`)

// HandoverKey is the hash in which the namespace remembers its last
// handover.
func (l *Lease) HandoverKey() string { return l.keys.Lease + ":handover" }

// Handover gives the lease this replica holds to another replica, unless
// none is alive or a handover's window still holds (see above). Handed
// over, this replica steps down at once and stays out of the election for
// the window (base, doubled for each recent handover, at most limit); it
// keeps heartbeating meanwhile. If nobody takes the lease within a TTL of
// the handover (the follower it was meant for is gone), the cool-down ends
// and this replica leads again. wait is the cool-down, or how long the
// window that refused it still holds.
func (l *Lease) Handover(ctx context.Context, reason string, base, limit time.Duration) (outcome HandoverOutcome, wait time.Duration, err error) {
	value, ok := l.Current()
	if !ok {
		return HandoverNotHeld, 0, nil
	}
	// Out of the election from before the release lands (for as long as
	// the call may take), so the lease loop cannot take the lease straight
	// back; undone below if the lease stays.
	l.mu.Lock()
	l.coolUntil = l.clock.Now().Add(2 * l.CallTimeout())
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, l.CallTimeout())
	defer cancel()
	res, err := Obey(ctx, func(ctx context.Context) ([]int64, error) {
		return handoverScript.Run(ctx, l.rdb, []string{l.keys.Lease, l.keys.Released, l.keys.Replicas, l.HandoverKey()},
			value, l.replica, l.HeartbeatStale().Milliseconds(), base.Milliseconds(), limit.Milliseconds()).Int64Slice()
	})
	if err == nil && len(res) != 2 {
		err = errors.New("handover script: unexpected reply")
	}
	if err == nil {
		outcome, wait = HandoverOutcome(res[0]), time.Duration(res[1])*time.Millisecond
	}
	l.mu.Lock()
	if err != nil || outcome != HandedOver {
		l.coolUntil = time.Time{}
	} else {
		l.coolFrom, l.coolUntil = l.clock.Now(), l.clock.Now().Add(wait)
	}
	l.mu.Unlock()
	if err != nil || outcome != HandedOver {
		return outcome, wait, err
	}
	l.stepDownOnPurpose(fmt.Sprintf("handed over (%s); staying out of the election for %s", reason, wait))
	signal(l.wake)
	return HandedOver, wait, nil
}

// CoolingDown reports whether this replica stays out of the election after
// a handover, and until when.
func (l *Lease) CoolingDown() (until time.Time, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.coolUntil, l.clock.Now().Before(l.coolUntil)
}

// endCoolDownUnheld ends the cool-down when the lease has been free for a
// TTL since the handover: the follower meant to take it is gone (crashed,
// cut off), and a slow leader beats none.
func (l *Lease) endCoolDownUnheld() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.clock.Now().Sub(l.coolFrom) < l.ttl {
		return false
	}
	l.coolUntil = time.Time{}
	l.log.Warn("no other replica took the lease it was handed; this replica ends its cool-down and leads again")
	return true
}

// coolDownLeft is how long the cool-down still lasts, 0 if none.
func (l *Lease) coolDownLeft() time.Duration {
	until, ok := l.CoolingDown()
	if !ok {
		return 0
	}
	return until.Sub(l.clock.Now())
}
