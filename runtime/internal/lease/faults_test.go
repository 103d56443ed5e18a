package lease

import (
	"context"
	"testing"
	"time"

	"github.com/belfry/belfry/internal/redistest"
	"github.com/belfry/belfry/runtime/internal/clock"
	"github.com/belfry/belfry/runtime/internal/store"
	"github.com/redis/go-redis/v9"
)

// faulty is a lease whose Redis traffic goes through a fault proxy in
// front of the shared Redis, and a direct client that sees the truth.
type faulty struct {
	proxy  *redistest.Proxy
	direct redis.UniversalClient
	keys   store.Keys
	clock  *clock.Stub
}

func setupFaulty(t *testing.T) *faulty {
	t.Helper()
	f := &faulty{
		proxy:  redistest.NewProxy(t, "tcp", redistest.SharedAddr()),
		direct: redistest.Shared(t),
		keys:   store.NewKeys(redistest.Uniq("lease")),
		clock:  clock.NewStub(time.Now()),
	}
	// Load the scripts first: otherwise the reply a test drops may be a
	// NOSCRIPT error, and the script would run only once.
	for _, s := range []*redis.Script{acquireScript, renewScript, releaseScript, liveReplicasScript} {
		if err := s.Load(context.Background(), f.direct).Err(); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func (f *faulty) lease(rdb redis.UniversalClient, replica string, ttl time.Duration) *Lease {
	return New(Config{Redis: rdb, Keys: f.keys, Replica: replica, TTL: ttl, Clock: f.clock})
}

func (f *faulty) stored(t *testing.T) string {
	t.Helper()
	v, err := f.direct.Get(context.Background(), f.keys.Lease).Result()
	if err != nil && err != redis.Nil {
		t.Fatal(err)
	}
	return v
}

// The acquire script runs, its reply is lost, and the command is sent again
// (by go-redis on EOF, or by the next Acquire when retries are off): the
// second run must see the new lease as this replica's own, not wait a full
// TTL while the lease is held by nobody who knows it.
func TestRecognisesItsOwnLeaseAfterALostAcquireReply(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		opts  redis.Options
		tries int
	}{
		{"go-redis retries", redis.Options{}, 1},
		{"next attempt", redis.Options{MaxRetries: -1}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			const ttl = 30 * time.Second
			f := setupFaulty(t)
			l := f.lease(f.proxy.Client(t, tc.opts), "r0", ttl)
			f.proxy.DropNextReply()
			var wait time.Duration
			var err error
			for range tc.tries {
				wait, err = l.Acquire(ctx)
			}
			if err != nil {
				t.Fatal(err)
			}
			if f.proxy.Dropped() != 1 {
				t.Fatalf("the proxy dropped %d replies, want 1", f.proxy.Dropped())
			}
			stored := f.stored(t)
			if replica, _ := ParseValue(stored); replica != "r0" {
				t.Fatalf("the lease key holds %q, want r0's lease", stored)
			}
			value, ok := l.Current()
			if !ok || value != stored {
				t.Fatalf("the key holds this replica's lease %q, but it holds %q (trusted %v) and waits %s", stored, value, ok, wait)
			}
			if wait != l.RenewEvery() {
				t.Errorf("next call in %s, want a renewal in %s", wait, l.RenewEvery())
			}
		})
	}
}

// Recognising its own lease goes by instance, not by name: a second process
// wrongly given the same Replica name does not take over the first's lease.
func TestSameReplicaNameIsNotTheSameHolder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := setupFaulty(t)
	first, second := f.lease(f.direct, "r0", 30*time.Second), f.lease(f.direct, "r0", 30*time.Second)
	if _, err := first.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := second.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	if v, ok := second.Current(); ok {
		t.Fatalf("a second process named r0 took over the first one's lease: it holds %q", v)
	}
	if v, ok := first.Current(); !ok || v != f.stored(t) {
		t.Fatalf("the first process holds %q (trusted %v), the key %q", v, ok, f.stored(t))
	}
}

// Renewal and release are compare-and-set on the exact value, so running
// them twice (a lost reply, resent) is harmless; with retries off, a renewal
// whose reply is lost steps down and the next acquire resumes the same lease.
func TestRenewAndReleaseSurviveALostReply(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := setupFaulty(t)
	l := f.lease(f.proxy.Client(t, redis.Options{}), "r0", 30*time.Second)
	if _, err := l.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	held, _ := l.Current()
	f.proxy.DropNextReply()
	if _, err := l.Renew(ctx); err != nil {
		t.Fatalf("renewal through a lost reply: %v", err)
	}
	if v, ok := l.Current(); !ok || v != held || f.proxy.Dropped() != 1 {
		t.Fatalf("after a renewal whose reply was lost (%d dropped) it holds %q (trusted %v), want %q", f.proxy.Dropped(), v, ok, held)
	}

	noRetry := f.lease(f.proxy.Client(t, redis.Options{MaxRetries: -1}), "r1", 30*time.Second)
	l.Release(ctx)
	if _, err := noRetry.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	held, _ = noRetry.Current()
	f.proxy.DropNextReply()
	if _, err := noRetry.Renew(ctx); err == nil {
		t.Fatal("a renewal whose reply was lost, with retries off, reported success")
	}
	if _, err := noRetry.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	if v, ok := noRetry.Current(); !ok || v != held {
		t.Fatalf("after stepping down on a lost renewal reply it holds %q (trusted %v), want its lease %q back", v, ok, held)
	}

	f.proxy.DropNextReply()
	noRetry.Release(ctx)
	if f.proxy.Dropped() != 3 {
		t.Fatalf("the proxy dropped %d replies, want 3", f.proxy.Dropped())
	}
	if v := f.stored(t); v != "" {
		t.Errorf("the lease key still holds %q after a release whose reply was lost", v)
	}
}

// A holder cut off from Redis steps down within its trust window, whatever
// the client's own timeouts: go-redis ignores a context deadline unless the
// client has ContextTimeoutEnabled, so without its own bound a renewal
// blocks for ReadTimeout per attempt (5 s by default) or for ever (-1).
func TestRenewalAgainstABlackHoleStepsDownWithinTheTrustWindow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts redis.Options
	}{
		{"default client", redis.Options{}},
		{"no read timeout", redis.Options{ReadTimeout: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			const ttl = 3 * time.Second
			f := setupFaulty(t)
			l := f.lease(f.proxy.Client(t, tc.opts), "r0", ttl)
			if _, err := l.Acquire(ctx); err != nil {
				t.Fatal(err)
			}
			signalled(l.Changed())
			f.proxy.BlackHole()
			start := time.Now()
			renewed := make(chan error, 1)
			go func() {
				_, err := l.Renew(ctx)
				renewed <- err
			}()
			window := ttl - l.TrustMargin()
			select {
			case err := <-renewed:
				if err == nil {
					t.Fatal("a renewal through a black-hole succeeded")
				}
				t.Logf("renewal gave up after %s: %v", time.Since(start).Round(time.Millisecond), err)
			case <-time.After(window):
				t.Fatalf("a renewal against a black-holed Redis had not returned after the trust window (%s)", window)
			}
			if _, ok := l.Current(); ok || l.Holding() != "" {
				t.Error("the holder did not step down when its renewal failed")
			}
			if !signalled(l.Changed()) {
				t.Error("stepping down did not signal Changed")
			}
		})
	}
}

// Observe, which the admin and health pages call, returns by the caller's
// deadline against a black-holed Redis.
func TestObserveObeysItsDeadline(t *testing.T) {
	t.Parallel()
	f := setupFaulty(t)
	rdb := f.proxy.Client(t, redis.Options{})
	f.proxy.BlackHole()
	const bound = 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	start := time.Now()
	_, err := Observe(ctx, rdb, f.keys, time.Minute)
	took := time.Since(start)
	if err == nil {
		t.Fatal("Observe through a black-hole succeeded")
	}
	if took > bound+200*time.Millisecond {
		t.Errorf("Observe with a %s deadline took %s against a black-holed Redis", bound, took)
	}
}

// A holder that stepped down (its renewal failed) and then shuts down
// still deletes its key, so a follower need not wait out the TTL.
func TestReleaseDeletesALeaseItSteppedDownFrom(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := setupFaulty(t)
	l := f.lease(f.direct, "r0", 30*time.Second)
	if _, err := l.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	l.StepDown("injected: renewal failed")
	l.Release(ctx)
	if v := f.stored(t); v != "" {
		t.Errorf("after a release the key still holds %q, this instance's lease", v)
	}
}

// A renewal never outlasts the trust window: with less of it left than
// CallTimeout, the holder learns of a black-holed renewal by the window's
// end, not CallTimeout later.
func TestRenewalGivesUpByTheEndOfTheTrustWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const ttl, left = 30 * time.Second, 300 * time.Millisecond
	f := setupFaulty(t)
	l := f.lease(f.proxy.Client(t, redis.Options{}), "r0", ttl)
	if _, err := l.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(ttl - l.TrustMargin() - left)
	f.proxy.BlackHole()
	start := time.Now()
	if _, err := l.Renew(ctx); err == nil {
		t.Fatal("a renewal through a black-hole succeeded")
	}
	if took := time.Since(start); took > left+500*time.Millisecond {
		t.Errorf("with %s of trust left, a black-holed renewal gave up after %s (CallTimeout %s)", left, took, l.CallTimeout())
	}
}

// Renewals are spaced from their sends, not their replies: a slow reply
// does not push the next renewal toward the end of the trust window.
func TestSlowRepliesDoNotDelayTheNextRenewal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const ttl, latency = 3 * time.Second, 400 * time.Millisecond
	f := setupFaulty(t)
	l := New(Config{Redis: f.proxy.Client(t, redis.Options{}), Keys: f.keys, Replica: "r0", TTL: ttl})
	f.proxy.Delay(latency)
	wait, err := l.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := l.RenewEvery() - latency; wait > want {
		t.Errorf("after an acquire whose reply took %s, the next renewal is in %s, want at most %s", latency, wait, want)
	}
	if wait, err = l.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	if want := l.RenewEvery() - latency; wait > want {
		t.Errorf("after a renewal whose reply took %s, the next one is in %s, want at most %s", latency, wait, want)
	}
}

// A Redis stall (DEBUG SLEEP: a long fork, a slow disk) outlasts a
// follower's acquire, which gives up; when Redis wakes it runs the acquire
// anyway. The replica must recognise that lease as its own at its next
// attempt, not wait out the TTL of a lease nobody knows it holds.
func TestAStallThatOutlastsAnAcquireDoesNotLockTheReplicaOut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const ttl, stall = 6 * time.Second, 3 * time.Second
	priv := redistest.StartPrivate(t)
	rdb := redis.NewClient(&redis.Options{Network: "unix", Addr: priv.Socket})
	t.Cleanup(func() { rdb.Close() })
	keys := store.NewKeys(redistest.Uniq("lease"))
	l := New(Config{Redis: rdb, Keys: keys, Replica: "r0", TTL: ttl})
	if stall <= l.CallTimeout() {
		t.Fatalf("the stall (%s) must outlast the acquire's bound (%s)", stall, l.CallTimeout())
	}

	priv.Stall(t, stall)

	stalled := time.Now()
	if _, err := l.Acquire(ctx); err == nil {
		t.Fatalf("an acquire sent into a %s stall succeeded after %s instead of giving up after %s",
			stall, time.Since(stalled).Round(time.Millisecond), l.CallTimeout())
	}
	redistest.WaitFor(t, ttl, "the replica to lead", func() bool {
		l.Acquire(ctx)
		_, ok := l.Current()
		return ok
	})
	// Its lease was created when Redis woke; a replica that did not know it
	// waits until that lease expires, stall + TTL after the stall began.
	took := time.Since(stalled)
	t.Logf("led %s after a %s stall began (TTL %s)", took.Round(time.Millisecond), stall, ttl)
	if took > stall+ttl/2 {
		t.Errorf("the replica led %s after a %s stall began; its own lease locked it out", took, stall)
	}
}
