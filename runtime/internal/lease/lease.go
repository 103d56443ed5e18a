package lease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/belfry/belfry/runtime/engine"
	"github.com/belfry/belfry/runtime/internal/clock"
	"github.com/belfry/belfry/runtime/internal/pipeline"
	"github.com/belfry/belfry/runtime/internal/store"
	"github.com/redis/go-redis/v9"
)

// Config configures a Lease.
type Config struct {
	Redis   redis.UniversalClient
	Keys    store.Keys
	Replica string
	TTL     time.Duration
	Log     *slog.Logger
	// OnRedis is told each call's outcome, so Redis reachability changes
	// can be logged once. Optional.
	OnRedis func(err error)
	// Clock measures the trust window; default clock.Real.
	Clock clock.Clock
	// MayLead, when set, is asked before every attempt to acquire or renew:
	// an error keeps this replica from leading (a holder releases), e.g.
	// while Redis would evict the lease. Optional.
	MayLead func(context.Context) error
	// OnHolder, when set, is told the value of another replica's lease each
	// time an acquire finds one, so that a follower knows the fencing tokens
	// handed out before it leads. Optional; must be quick.
	OnHolder func(value string)
	// OnHeld, when set, is told this replica's lease value each time an
	// acquire or renewal succeeds: the key was there, so Redis still held
	// the lease at that moment. Optional; must be quick.
	OnHeld func(value string)
	// Acks, when on, makes an acquire or renewal count only once replicas
	// acknowledge it: one that Redis ran but no replica has yet fails
	// like a lost reply (no lead, or a step-down), and leaves a lease of
	// this instance that the next acquire resumes (and has acknowledged).
	Acks pipeline.Acks
}

// Lease is this replica's view of the scheduler lease; see the package doc.
type Lease struct {
	rdb      redis.UniversalClient
	keys     store.Keys
	replica  string
	ttl      time.Duration
	log      *slog.Logger
	onRedis  func(err error)
	clock    clock.Clock
	mayLead  func(context.Context) error
	onHolder func(value string)
	onHeld   func(value string)
	acks     pipeline.Acks

	// instance is random per Lease: it tells this process's leases from
	// those of a restarted process, or of another one wrongly configured
	// with the same Replica name.
	instance string
	// process is this process's Process.String, carried by heartbeats.
	process string

	mu sync.Mutex
	// value is "<replica>|<instance>|<token>" while this replica holds the
	// lease.
	value string
	// trustedUntil is measured from the moment the last successful acquire
	// or renew was *sent*, so it never outlives the key in Redis, whatever
	// the network delay.
	trustedUntil time.Time
	// lastHeartbeat is when this replica last recorded its heartbeat.
	lastHeartbeat time.Time
	// beaten is set once a heartbeat has landed: from then on, another
	// instance found under this name is alive beside this one.
	beaten bool
	// duplicate is the last other process seen using this replica's name.
	duplicate Duplicate
	// since is when this replica gained the lease it holds.
	since time.Time
	// coolUntil keeps this replica out of the election after it handed
	// the lease over at coolFrom (see Handover).
	coolFrom, coolUntil time.Time
	// created counts the leases this instance created with a new token,
	// as opposed to resumed ones.
	created uint64

	// changed receives a signal whenever leadership is gained or lost.
	changed chan struct{}
	// wake ends a follower's wait early (a holder released the lease).
	wake chan struct{}
}

// New returns a lease that does nothing until Run, Acquire or Renew.
func New(cfg Config) *Lease {
	l := &Lease{
		rdb: cfg.Redis, keys: cfg.Keys, replica: cfg.Replica, ttl: cfg.TTL, log: cfg.Log,
		onRedis: cfg.OnRedis, clock: cfg.Clock, mayLead: cfg.MayLead, onHolder: cfg.OnHolder, onHeld: cfg.OnHeld, acks: cfg.Acks, instance: newInstanceID(),
		process: thisProcess().String(),
		changed: make(chan struct{}, 1), wake: make(chan struct{}, 1),
	}
	if l.clock == nil {
		l.clock = clock.Real{}
	}
	if l.onRedis == nil {
		l.onRedis = func(error) {}
	}
	if l.log == nil {
		l.log = slog.Default()
	}
	return l
}

func thisProcess() Process {
	host, _ := os.Hostname()
	return Process{PID: os.Getpid(), Host: host}
}

// parseProcess reads what String wrote; ok is false for anything else.
func parseProcess(v string) (p Process, ok bool) {
	pid, host, _ := strings.Cut(v, " ")
	n, err := strconv.Atoi(pid)
	if err != nil || n <= 0 {
		return Process{}, false
	}
	return Process{PID: n, Host: host}, true
}

func newInstanceID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Instance returns this lease's instance ID, the middle field of the lease
// value: random per process, so two processes never share one.
func (l *Lease) Instance() string { return l.instance }

// TrustMargin is how long before the key's expiry the holder stops trusting
// its lease, absorbing clock-rate differences between this host and Redis.
func (l *Lease) TrustMargin() time.Duration { return l.ttl / 10 }

// RenewEvery is the renewal period: two renewals can fail before the trust
// window ends, but the holder steps down at the first.
func (l *Lease) RenewEvery() time.Duration { return l.ttl / 3 }

// HeartbeatStale is how old a heartbeat may be before the replica is
// considered gone. Replicas heartbeat about once per TTL.
func (l *Lease) HeartbeatStale() time.Duration { return 3 * l.ttl }

// CallTimeout bounds each lease call to Redis. A renewal starts RenewEvery
// after the last one was sent and gives up CallTimeout later, before the
// trust window (TTL minus TrustMargin after that send) ends, so a holder
// cut off from Redis steps down by itself instead of waiting for its
// trust to lapse.
func (l *Lease) CallTimeout() time.Duration { return l.ttl / 3 }

// callBound is how long the next call may take: CallTimeout, but no longer
// than the trust window has left, so a holder never learns of a failed
// renewal after its trust has lapsed. A lapsed window (a stalled process)
// leaves the full CallTimeout, so the renewal can still restore it.
func (l *Lease) callBound() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	bound := l.CallTimeout()
	if left := l.trustedUntil.Sub(l.clock.Now()); l.value != "" && left > 0 && left < bound {
		bound = left
	}
	return bound
}

// nextRenewal is when to renew a lease whose last successful call was
// sent at sent: RenewEvery after that send, not after the reply, so a
// slow reply does not push the next renewal toward the trust window's end.
func (l *Lease) nextRenewal(sent time.Time) time.Duration {
	return max(0, l.RenewEvery()-l.clock.Now().Sub(sent))
}

// Changed receives a signal whenever leadership is gained or lost, or a
// lapsed trust window is restored.
func (l *Lease) Changed() <-chan struct{} { return l.changed }

// heartbeatDue says whether this lease call should carry a heartbeat ("0"
// no, "1" this instance's first, "2" a later one; see heartbeatLua), and
// assumes it will succeed (a failed call is retried soon anyway).
func (l *Lease) heartbeatDue() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	if now.Sub(l.lastHeartbeat) < l.ttl*9/10 {
		return "0"
	}
	l.lastHeartbeat = now
	if !l.beaten {
		return "1"
	}
	return "2"
}

// Duplicate reports another process heartbeating under this replica's name,
// seen within HeartbeatStale. Each replica learns of it within about two
// TTLs of both running, and logs it once per other instance. A restart
// under the same name is not a duplicate: the previous incarnation no
// longer beats.
func (l *Lease) Duplicate() (Duplicate, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.duplicate
	return d, d.Other != "" && l.clock.Now().Sub(d.LastSeen) < l.HeartbeatStale()
}

// heartbeatLanded records a heartbeat that reached Redis, and what it
// found under this replica's name.
func (l *Lease) heartbeatLanded(other string) {
	l.mu.Lock()
	l.beaten = true
	if other == "" {
		l.mu.Unlock()
		return
	}
	first := l.duplicate.Other != other
	l.duplicate = Duplicate{Replica: l.replica, Instance: l.instance, Other: other, LastSeen: l.clock.Now()}
	d := l.duplicate
	l.mu.Unlock()
	if first {
		l.log.Error("DUPLICATE REPLICA NAME: "+d.String(), "replica", d.Replica, "instance", d.Instance, "other_instance", d.Other)
	}
}

// scriptKeys are the KEYS of the lease scripts that heartbeat.
func (l *Lease) scriptKeys(second string) []string {
	return []string{l.keys.Lease, second, l.keys.Replicas, l.keys.Replicas + ":" + l.replica, l.keys.ReplicaProcesses}
}

// call runs acquireScript or renewScript, bounded by CallTimeout, with the
// ARGV they share, and notes the heartbeat it carried once it has landed.
// The scripts' replies end with the duplicate instance found, if any.
func (l *Lease) call(ctx context.Context, s *redis.Script, extra ...any) ([]any, error) {
	ctx, cancel := context.WithTimeout(ctx, l.callBound())
	defer cancel()
	beat := l.heartbeatDue()
	args := append([]any{l.replica, l.ttl.Milliseconds(), l.instance, beat, l.HeartbeatStale().Milliseconds(), l.process}, extra...)
	res, err := Obey(ctx, func(ctx context.Context) ([]any, error) {
		return l.acks.Run(ctx, l.rdb, s, l.scriptKeys(l.keys.Token), args...).Slice()
	})
	if err != nil {
		return nil, err
	}
	if len(res) == 0 {
		return nil, errors.New("lease script: empty reply")
	}
	if beat != "0" {
		other, _ := res[len(res)-1].(string)
		l.heartbeatLanded(other)
	}
	return res, nil
}

// Current returns the lease value if this replica holds the lease and may
// still trust it.
func (l *Lease) Current() (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.value == "" || l.clock.Now().After(l.trustedUntil) {
		return "", false
	}
	return l.value, true
}

// Created counts the leases this instance has created with a new fencing
// token (INCR), as opposed to resuming its own. Resuming keeps the value;
// creating one again that equals a value held before means the token
// counter went back: Redis lost writes (a failover to a replica behind).
func (l *Lease) Created() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.created
}

// Holding reports the value held, trusted or not (for release on shutdown).
func (l *Lease) Holding() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.value
}

func (l *Lease) setLeader(value string, sent time.Time) {
	l.mu.Lock()
	gained := l.value != value
	// A renewal that lands after the trust window ended (the process was
	// stalled) keeps the value, but the scheduler stood down meanwhile and
	// waits for a change: wake it as for a new lease.
	lapsed := !gained && l.clock.Now().After(l.trustedUntil)
	l.value = value
	l.trustedUntil = sent.Add(l.ttl - l.TrustMargin())
	if gained {
		l.since = l.clock.Now()
	}
	l.mu.Unlock()
	if gained {
		l.log.Info("lease acquired: this replica schedules", "lease", value)
	}
	if l.onHeld != nil {
		l.onHeld(value)
	}
	if gained || lapsed {
		signal(l.changed)
	}
}

// Since is when this replica gained the lease it holds (zero if none).
func (l *Lease) Since() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.value == "" {
		return time.Time{}
	}
	return l.since
}

// StepDown gives up leadership locally at once, because the lease was
// lost or can no longer be trusted.
func (l *Lease) StepDown(reason string) {
	l.stepDown(slog.LevelWarn, "lease lost: this replica stops scheduling", reason)
}

// stepDown gives up leadership locally and, if this replica led, says so:
// a WARN when the lease was taken from it, an INFO when it gave the lease
// up on purpose (a shutdown, a handover), which asks nothing of anyone.
func (l *Lease) stepDown(level slog.Level, msg, reason string) {
	l.mu.Lock()
	was := l.value
	l.value = ""
	l.mu.Unlock()
	if was != "" {
		l.log.Log(context.Background(), level, msg, "lease", was, "reason", reason)
		signal(l.changed)
	}
}

// stepDownOnPurpose gives up leadership locally because this replica chose
// to: logged at INFO as a release.
func (l *Lease) stepDownOnPurpose(reason string) {
	l.stepDown(slog.LevelInfo, "lease released: this replica stops scheduling", reason)
}

// LapseTrust ends the trust window now, as a stall (GC pause, SIGSTOP) that
// outlasts it does while the key lives on in Redis. For tests of what the
// scheduler does then.
func (l *Lease) LapseTrust() {
	l.mu.Lock()
	l.trustedUntil = l.clock.Now().Add(-time.Millisecond)
	l.mu.Unlock()
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Run keeps trying to acquire the lease and, while holding it, renews it,
// until ctx ends. It does not release the lease: call Release for that.
func (l *Lease) Run(ctx context.Context) {
	go l.listenForRelease(ctx)
	backoff := clock.NewBackoff(100*time.Millisecond, 5*time.Second)
	for ctx.Err() == nil {
		var wait time.Duration
		var err error
		switch {
		case l.refused(ctx):
			wait = l.RenewEvery()
		case l.Holding() != "":
			wait, err = l.Renew(ctx)
		case l.coolDownLeft() > 0:
			// Handed over: heartbeat, so the replica stays listed and
			// counts as a follower, but do not take the lease.
			wait, err = l.acquire(ctx, true)
			wait = min(wait, l.coolDownLeft())
		default:
			wait, err = l.Acquire(ctx)
		}
		l.onRedis(err)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			wait = backoff.Next()
		} else {
			backoff.Reset()
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

// refused asks MayLead, and gives the lease up if this replica may not lead.
func (l *Lease) refused(ctx context.Context) bool {
	if l.mayLead == nil {
		return false
	}
	err := l.mayLead(ctx)
	if err == nil {
		return false
	}
	if l.Holding() != "" {
		l.log.Error("giving up the lease: "+err.Error(), "lease", l.Holding())
		l.Release(ctx)
	}
	return true
}

// Acquire tries once to take the lease (or resume one of this instance's,
// see acquireScript) and returns when to try or renew next.
func (l *Lease) Acquire(ctx context.Context) (time.Duration, error) {
	return l.acquire(ctx, false)
}

// acquire is Acquire, or with holdOff only a heartbeat and a look at the
// holder.
func (l *Lease) acquire(ctx context.Context, holdOff bool) (time.Duration, error) {
	sent := l.clock.Now()
	flag := "0"
	if holdOff {
		flag = "1"
	}
	res, err := l.call(ctx, acquireScript, flag)
	if err != nil {
		return 0, err
	}
	if len(res) != 5 {
		return 0, errors.New("acquire script: unexpected reply")
	}
	token, _ := res[0].(int64)
	value, _ := res[1].(string)
	pttl, _ := res[2].(int64)
	if token > 0 {
		if res[3] == int64(1) {
			l.mu.Lock()
			l.created++
			l.mu.Unlock()
		}
		l.setLeader(value, sent)
		return l.nextRenewal(sent), nil
	}
	if l.onHolder != nil && value != "" {
		l.onHolder(value)
	}
	if holdOff && value == "" && l.endCoolDownUnheld() {
		return 0, nil // nobody took the lease: take it now
	}
	// Try again the moment the holder's key expires (plus a hair, so the
	// key is surely gone), but heartbeat at least once per TTL.
	wait := time.Duration(pttl)*time.Millisecond + 2*time.Millisecond
	if pttl < 0 || wait > l.ttl {
		wait = l.ttl
	}
	return wait, nil
}

// Renew extends the lease this replica holds, stepping down if the renewal
// fails or is refused, and returns when to renew next.
func (l *Lease) Renew(ctx context.Context) (time.Duration, error) {
	value := l.Holding()
	sent := l.clock.Now()
	res, err := l.call(ctx, renewScript, value)
	if err == nil && len(res) != 2 {
		err = errors.New("renew script: unexpected reply")
	}
	switch {
	case err != nil:
		l.StepDown("renewal failed: " + err.Error())
		return 0, err
	case res[0] != int64(1):
		l.StepDown("another replica holds the lease")
		return 0, nil
	}
	l.setLeader(value, sent)
	return l.nextRenewal(sent), nil
}

// Release hands the lease over on shutdown: it deletes the key if it holds
// a lease of this instance, held or stepped down from, and tells followers.
func (l *Lease) Release(ctx context.Context) {
	l.stepDownOnPurpose("shutting down")
	ctx, cancel := context.WithTimeout(ctx, l.CallTimeout())
	defer cancel()
	_, err := Obey(ctx, func(ctx context.Context) (any, error) {
		return releaseScript.Run(ctx, l.rdb, l.scriptKeys(l.keys.Released), l.replica, l.instance).Result()
	})
	if err != nil {
		l.log.Warn("could not release the lease; a follower takes over when it expires", "err", err)
	}
}

// listenForRelease wakes the follower loop as soon as a holder releases the
// lease, so a graceful handover does not wait for the TTL.
func (l *Lease) listenForRelease(ctx context.Context) {
	ps := l.rdb.Subscribe(ctx, l.keys.Released)
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
			// The payload is the released lease value: this instance's
			// own release needs no wake-up, but another process's does,
			// even one wrongly using the same Replica name.
			if instanceOf(msg.Payload) != l.instance {
				signal(l.wake)
			}
		}
	}
}

// Observe reads who holds the lease and which replicas have a fresh
// heartbeat, in one round trip. It returns when ctx ends, whatever the
// client's own timeouts (see Obey).
func Observe(ctx context.Context, rdb redis.UniversalClient, k store.Keys, stale time.Duration) (Holder, error) {
	var h Holder
	var leaseCmd *redis.StringCmd
	var replicasCmd *redis.Cmd
	_, err := Obey(ctx, func(ctx context.Context) ([]redis.Cmder, error) {
		return rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			leaseCmd = p.Get(ctx, k.Lease)
			// Eval, not Run: inside a pipeline a NOSCRIPT error cannot fall back.
			replicasCmd = liveReplicasScript.Eval(ctx, p, []string{k.Replicas, k.ReplicaProcesses}, stale.Milliseconds())
			return nil
		})
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return h, err
	}
	if v, err := leaseCmd.Result(); err == nil {
		h.Replica, h.Token = ParseValue(v)
		h.Instance = instanceOf(v)
	}
	h.Replicas, h.Processes = liveReplicas(replicasCmd.Val())
	return h, nil
}

// liveReplicas reads liveReplicasScript's reply.
func liveReplicas(reply any) (names []string, processes map[string]Process) {
	parts, _ := reply.([]any)
	if len(parts) != 2 {
		return nil, nil
	}
	live, _ := parts[0].([]any)
	procs, _ := parts[1].([]any)
	processes = map[string]Process{}
	for i, v := range live {
		name, _ := v.(string)
		names = append(names, name)
		if i < len(procs) {
			if s, ok := procs[i].(string); ok {
				if p, ok := parseProcess(s); ok {
					processes[name] = p
				}
			}
		}
	}
	return names, processes
}

// ParseValue splits a lease value "<replica>|<instance>|<token>" (or the
// older "<replica>|<token>") into the replica name and the token. Replica
// names cannot contain '|'.
func ParseValue(v string) (replica string, token int64) {
	first, last := strings.IndexByte(v, '|'), strings.LastIndexByte(v, '|')
	if first <= 0 {
		return "", 0
	}
	token, _ = strconv.ParseInt(v[last+1:], 10, 64)
	return v[:first], token
}

// instanceOf returns the instance ID in a lease value, "" if it has none.
func instanceOf(v string) string {
	first, last := strings.IndexByte(v, '|'), strings.LastIndexByte(v, '|')
	if first < 0 || first == last {
		return ""
	}
	return v[first+1 : last]
}

// The lease's value types are the engine's (package engine).
type (
	Process   = engine.Process
	Duplicate = engine.Duplicate
	Holder    = engine.Holder
)

// Obey runs call and returns its result, or ctx's error as soon as ctx
// ends, whichever comes first (engine.Obey). go-redis honours a context
// deadline only on a client built with ContextTimeoutEnabled; on any other
// client a command on a black-holed connection blocks for the client's
// ReadTimeout (per attempt, and a read timeout is retried MaxRetries
// times), or for ever with ReadTimeout -1, however short the caller's
// deadline. The lease's correctness depends on giving up in time, not on
// how the application built its client.
//
// A call given up on goes on in its goroutine with ctx ended, so go-redis
// stops it at its next retry or pool wait (both honour ctx on every
// client); until then it holds one pooled connection, and once the pool is
// exhausted new calls wait in the pool and give up with their own ctx, so
// abandoned calls never outnumber the pool. Its result is discarded: the
// lease scripts are compare-and-set, and an acquire that lands late leaves
// a lease of this instance, which the next Acquire resumes.
func Obey[T any](ctx context.Context, call func(context.Context) (T, error)) (T, error) {
	v, err := engine.Obey(ctx, call)
	if errors.Is(err, engine.ErrNoAnswer) {
		err = fmt.Errorf("redis %w", err)
	}
	return v, err
}
