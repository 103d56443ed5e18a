package lease

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/belfry/belfry/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// logBuffer is a concurrency-safe log sink a test can search.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) count(s string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Count(b.buf.String(), s)
}

func (f *faulty) loggedLease(rdb redis.UniversalClient, replica string, ttl time.Duration) (*Lease, *logBuffer) {
	logs := &logBuffer{}
	l := New(Config{Redis: rdb, Keys: f.keys, Replica: replica, TTL: ttl, Clock: f.clock,
		Log: slog.New(slog.NewTextHandler(logs, nil))})
	return l, logs
}

// Two live processes with one Replica name both flag it, each logging it
// once, while the lease stays with the first.
func TestDuplicateReplicaNamesAreFlagged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const ttl = 10 * time.Second
	f := setupFaulty(t)
	a, aLogs := f.loggedLease(f.direct, "r0", ttl)
	b, bLogs := f.loggedLease(f.direct, "r0", ttl)
	for range 3 { // three heartbeat periods, both processes beating
		for _, l := range []*Lease{a, b} {
			if _, err := l.Acquire(ctx); err != nil {
				t.Fatal(err)
			}
		}
		f.clock.Advance(ttl)
	}
	for _, tc := range []struct {
		name     string
		l, other *Lease
		logs     *logBuffer
	}{{"first", a, b, aLogs}, {"second", b, a, bLogs}} {
		d, ok := tc.l.Duplicate()
		if !ok || d.Other != tc.other.Instance() || d.Instance != tc.l.Instance() || d.Replica != "r0" {
			t.Errorf("%s process: Duplicate() = %+v, %v; want the other instance %s", tc.name, d, ok, tc.other.Instance())
		}
		if n := tc.logs.count("DUPLICATE REPLICA NAME"); n != 1 {
			t.Errorf("%s process logged the duplicate name %d times, want once", tc.name, n)
		}
	}
	if _, ok := b.Current(); ok {
		t.Error("the second process named r0 holds the lease")
	}

	// Once the other process is gone, the flag clears after HeartbeatStale.
	f.clock.Advance(a.HeartbeatStale())
	if d, ok := a.Duplicate(); ok {
		t.Errorf("still flagged as a duplicate %s after the other process stopped beating: %+v", a.HeartbeatStale(), d)
	}
}

// A restart under the same name is not a duplicate: the previous
// incarnation's heartbeat is found once, by the new one's first beat.
func TestRestartUnderTheSameNameIsNotADuplicate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const ttl = 10 * time.Second
	f := setupFaulty(t)
	old, _ := f.loggedLease(f.direct, "r0", ttl)
	if _, err := old.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	// old crashes; restarted lives on, beating as a follower or holder.
	restarted, logs := f.loggedLease(f.direct, "r0", ttl)
	for range 3 {
		if _, err := restarted.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
		f.clock.Advance(ttl)
	}
	if d, ok := restarted.Duplicate(); ok || logs.count("DUPLICATE") != 0 {
		t.Errorf("a restart under the same name was flagged as a duplicate: %+v", d)
	}
}

// A graceful release wakes every follower at once, including one wrongly
// sharing the holder's Replica name: it must not wait out the TTL.
func TestReleaseWakesAFollowerWithTheSameName(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const ttl = 30 * time.Second
	f := setupFaulty(t)
	holder, follower := f.lease(f.direct, "r0", ttl), f.lease(f.direct, "r0", ttl)
	if _, err := holder.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); follower.Run(runCtx) }()
	defer func() { stop(); <-done }()
	redistest.WaitFor(t, 5*time.Second, "the follower to subscribe to releases", func() bool {
		n, err := f.direct.PubSubNumSub(ctx, f.keys.Released).Result()
		return err == nil && n[f.keys.Released] > 0
	})
	holder.Release(ctx)
	redistest.WaitFor(t, 5*time.Second, "the follower to take over the released lease", func() bool {
		_, ok := follower.Current()
		return ok
	})
}
