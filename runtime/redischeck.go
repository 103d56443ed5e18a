package runtime

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/belfry/belfry/runtime/internal/lease"
	"github.com/redis/go-redis/v9"
)

// MinRedisVersion is the oldest Redis the runtime leads on: asynq's scripts
// need 6.2.
const MinRedisVersion = "6.2.0"

// ErrUnsafeRedis: Redis could lose the runtime's state without a failure
// (it evicts keys) or is too old; the runtime does not lead on it.
var ErrUnsafeRedis = errors.New("unsafe Redis")

// ErrRedisCluster: the runtime was given a Redis Cluster — a cluster
// client, a server that is a cluster node, or a Redis that answers as one
// (CROSSSLOT, MOVED, ASK: a proxy in front of a cluster). It is a
// configuration error, not an outage: New refuses a cluster client, and
// otherwise the runtime does not lead and health says why.
var ErrRedisCluster = errors.New("configuration error: belfry does not run on Redis Cluster yet")

// clusterAdvice ends every ErrRedisCluster message: why, and what to use.
const clusterAdvice = "belfry's keys are not hash-tagged yet, so its scripts touch keys in several slots, which a cluster refuses (CROSSSLOT); " +
	"use a single primary (redis.NewClient) or Sentinel (redis.NewFailoverClient) instead"

// clusterRefusal returns the ErrRedisCluster that err means when Redis
// refused a command as only a cluster node does, else nil. These are
// Redis's own replies, so their first word says what they are.
func clusterRefusal(err error) error {
	var reply redis.Error
	if err == nil || !errors.As(err, &reply) {
		return nil
	}
	msg := reply.Error()
	for _, prefix := range []string{"CROSSSLOT ", "MOVED ", "ASK "} {
		if strings.HasPrefix(msg, prefix) {
			return fmt.Errorf("%w: Redis answered %q, so it is a Redis Cluster or a proxy in front of one; %s", ErrRedisCluster, msg, clusterAdvice)
		}
	}
	return nil
}

// refuseCluster makes this replica stop leading on its Redis until Redis
// is seen down and back (it may then be another server), and logs why
// once: no retry mends a cluster.
func (r *Runtime) refuseCluster(refusal error) {
	c := &r.redisCheck
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cluster != nil {
		return
	}
	c.cluster = refusal
	if errors.Is(c.unsafe, ErrRedisCluster) {
		return // INFO said so already, and the log with it
	}
	logged := refusal.Error()
	r.log.Error("belfry will not schedule on this Redis: " + logged)
	c.logged = logged
}

// refusesCluster says whether this replica found its Redis to be a
// cluster (an ErrRedisCluster verdict or reply).
func (r *Runtime) refusesCluster() bool {
	c := &r.redisCheck
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cluster != nil || errors.Is(c.unsafe, ErrRedisCluster)
}

// redisCheckEvery is how long a verdict on Redis's settings stands; a
// reconnect after an outage asks again at once.
const redisCheckEvery = time.Minute

// redisCheck remembers the last verdict on Redis's settings.
type redisCheck struct {
	every   time.Duration // redisCheckEvery; tests shorten it
	mu      sync.Mutex
	at      time.Time
	unsafe  error  // nil when safe or not known
	logged  string // the verdict last logged, so each is logged once
	stale   bool   // Redis reconnected since: ask again
	checked bool
	// cluster is the ErrRedisCluster a cluster's reply gave (see
	// refuseCluster); it stands until Redis reconnects.
	cluster error
	// skew is this replica's clock minus Redis's at the last check.
	skew      time.Duration
	skewKnown bool
}

// mayLead is the lease's MayLead: it refuses while Redis evicts keys (the
// lease, the fencing token and the cursors would vanish, and with them the
// guarantee), is older than MinRedisVersion, or while this replica's clock
// is further from Redis's than SkewMargin (it would run slots early or late).
func (r *Runtime) mayLead(ctx context.Context) error {
	c := &r.redisCheck
	c.mu.Lock()
	if c.cluster != nil {
		defer c.mu.Unlock()
		return c.cluster
	}
	if c.checked && !c.stale && time.Since(c.at) < c.every {
		defer c.mu.Unlock()
		return c.unsafe
	}
	c.mu.Unlock()
	// Bounded, and without the lock: on a black-holed connection go-redis
	// would otherwise wait for its read timeout (or for ever), holding up the
	// lease loop and every snapshot that asks RedisDiagnostics.Unsafe.
	ictx, cancel := context.WithTimeout(ctx, r.redis.CallTimeout())
	defer cancel()
	type reading struct {
		info       string
		redisNow   time.Time
		sent, back time.Time
	}
	read, err := lease.Obey(ictx, func(ctx context.Context) (reading, error) {
		var info *redis.StringCmd
		var now *redis.TimeCmd
		sent := r.clock.Now()
		_, err := r.redis.Client.Pipelined(ctx, func(p redis.Pipeliner) error {
			info, now = p.Info(ctx), p.Time(ctx)
			return nil
		})
		return reading{info: info.Val(), redisNow: now.Val(), sent: sent, back: r.clock.Now()}, err
	})
	if err != nil {
		return nil // the lease's own call reports Redis being down
	}
	// This replica's clock against Redis's, taking Redis's reading to be
	// from the middle of the round trip.
	skew := read.sent.Add(read.back.Sub(read.sent) / 2).Sub(read.redisNow)
	verdict := judgeRedis(read.info)
	if verdict == nil && (skew > r.opts.SkewMargin || skew < -r.opts.SkewMargin) {
		verdict = fmt.Errorf("%w: this replica's clock is %s off Redis's, more than SkewMargin (%s): it would run slots early or late; fix the host's time (NTP)",
			ErrClockSkew, skew.Round(time.Millisecond), r.opts.SkewMargin)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.skew, c.skewKnown = skew, true
	c.at, c.checked, c.stale, c.unsafe = time.Now(), true, false, verdict
	if c.cluster != nil {
		return c.cluster // a reply said so while INFO was read, and logged it
	}
	switch logged := fmt.Sprint(verdict); {
	case verdict != nil && logged != c.logged:
		r.log.Error("belfry will not schedule on this Redis: " + verdict.Error())
		c.logged = logged
	case verdict == nil && c.logged != "":
		r.log.Info("Redis settings are safe again; scheduling resumes")
		c.logged = ""
	}
	return verdict
}

// ErrClockSkew: this replica's clock is further from Redis's than
// SkewMargin; it does not lead.
var ErrClockSkew = errors.New("clock skew")

// ClockSkew is this replica's clock minus Redis's, as last measured (before
// leading, then about once a minute); ok is false until measured.
func (rd *RedisDiagnostics) ClockSkew() (skew time.Duration, ok bool) {
	r := rd.rt
	c := &r.redisCheck
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.skew, c.skewKnown
}

// Unsafe says why this replica will not lead on its Redis, or "".
func (rd *RedisDiagnostics) Unsafe() string {
	r := rd.rt
	c := &r.redisCheck
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.cluster != nil:
		return c.cluster.Error()
	case c.unsafe != nil:
		return c.unsafe.Error()
	}
	return ""
}

// judgeRedis reads INFO's cluster_enabled, redis_version and
// maxmemory_policy. A server that reports none (an embedded Redis such as
// miniredis) is not judged.
func judgeRedis(info string) error {
	fields := map[string]string{}
	for line := range strings.Lines(info) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			fields[k] = v
		}
	}
	if fields["cluster_enabled"] == "1" {
		return fmt.Errorf("%w: the Redis it was given is a cluster node (cluster_enabled:1); %s", ErrRedisCluster, clusterAdvice)
	}
	var problems []string
	if v, ok := fields["redis_version"]; ok && versionLess(v, MinRedisVersion) {
		problems = append(problems, fmt.Sprintf("Redis %s is older than %s, which asynq and belfry need", v, MinRedisVersion))
	}
	// A policy other than noeviction evicts only under a memory limit:
	// maxmemory 0 is none.
	if p, ok := fields["maxmemory_policy"]; ok && p != "noeviction" && fields["maxmemory"] != "0" {
		problems = append(problems, fmt.Sprintf("maxmemory-policy is %s: Redis may evict the lease, the fencing token and the cursors, "+
			"which runs slots twice or never; set maxmemory-policy noeviction", p))
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrUnsafeRedis, strings.Join(problems, "; "))
}

// versionLess compares dotted versions numerically.
func versionLess(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := range max(len(as), len(bs)) {
		var x, y int
		if i < len(as) {
			x, _ = strconv.Atoi(as[i])
		}
		if i < len(bs) {
			y, _ = strconv.Atoi(bs[i])
		}
		if x != y {
			return x < y
		}
	}
	return false
}
