package core

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/belfry/belfry/runtime/engine"
)

// refusal returns, when err is the engine's server refusing what belfry
// asks of it for how it is set up (for Redis: a cluster's reply), the
// error saying so; else nil.
func (r *Runtime) refusal(err error) error {
	if settings, ok := r.eng.(engine.Settings); ok && err != nil {
		return settings.Refusal(err)
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
	if errors.Is(c.unsafe, engine.ErrRefused) {
		return // INFO said so already, and the log with it
	}
	logged := refusal.Error()
	r.log.Error("belfry will not schedule on this Redis: " + logged)
	c.logged = logged
}

// refusesCluster says whether this replica found its Redis to be a
// cluster (a verdict or reply that is engine.ErrRefused).
func (r *Runtime) refusesCluster() bool {
	c := &r.redisCheck
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cluster != nil || errors.Is(c.unsafe, engine.ErrRefused)
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
	// cluster is the refusal a cluster's reply gave (see
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
	settings, ok := r.eng.(engine.Settings)
	if !ok {
		return nil
	}
	// Without the lock: the engine bounds its call, but a snapshot that
	// asks Diagnostics.Unsafe meanwhile need not wait for it.
	sent := r.clock.Now()
	read, err := settings.CheckSettings(ctx)
	back := r.clock.Now()
	if err != nil {
		return nil // the lease's own call reports Redis being down
	}
	// This replica's clock against Redis's, taking Redis's reading to be
	// from the middle of the round trip.
	skew := sent.Add(back.Sub(sent) / 2).Sub(read.Now)
	verdict := read.Unsafe
	if verdict == nil && (skew > r.opts.SkewMargin || skew < -r.opts.SkewMargin) {
		verdict = fmt.Errorf("%w: this replica's clock is %s off %s's, more than SkewMargin (%s): it would run slots early or late; fix the host's time (NTP)",
			ErrClockSkew, skew.Round(time.Millisecond), r.serverName(), r.opts.SkewMargin)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.skew, c.skewKnown = skew, true
	c.at, c.checked, c.stale, c.unsafe = time.Now(), true, read.Unsafe != nil && read.Passing, verdict
	if c.cluster != nil {
		return c.cluster // a reply said so while INFO was read, and logged it
	}
	switch logged := fmt.Sprint(verdict); {
	case verdict != nil && logged != c.logged:
		r.log.Error("belfry will not schedule on this " + r.serverName() + ": " + verdict.Error())
		c.logged = logged
	case verdict == nil && c.logged != "":
		r.log.Info(r.serverName() + " settings are safe again; scheduling resumes")
		c.logged = ""
	}
	return verdict
}

// serverName is the engine's server in messages: Redis, or the name the
// engine gives itself (engine.Named), capitalised.
func (r *Runtime) serverName() string {
	if n, ok := r.eng.(engine.Named); ok && n.EngineName() != "" {
		name := n.EngineName()
		return strings.ToUpper(name[:1]) + name[1:]
	}
	return "Redis"
}

// ErrClockSkew: this replica's clock is further from Redis's than
// SkewMargin; it does not lead.
var ErrClockSkew = errors.New("clock skew")

// ClockSkew is this replica's clock minus Redis's, as last measured (before
// leading, then about once a minute); ok is false until measured.
func (d *Diagnostics) ClockSkew() (skew time.Duration, ok bool) {
	r := d.rt
	c := &r.redisCheck
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.skew, c.skewKnown
}

// Unsafe says why this replica will not lead on its Redis, or "".
func (d *Diagnostics) Unsafe() string {
	r := d.rt
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
