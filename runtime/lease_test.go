package runtime_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
	"github.com/hibiken/asynq"
)

func idleSchedule() registry.Schedule {
	return registry.Schedule{Name: "nightly", Expr: "17 3 * * *", Handler: func(context.Context, registry.Occurrence) error { return nil }}
}

// newReplicas builds n runtimes on one namespace without running them.
func newReplicas(t *testing.T, n int, ttl time.Duration, scheds ...registry.Schedule) []*runtime.Runtime {
	t.Helper()
	rdb := sharedRedis(t)
	reg, err := registry.New(scheds...)
	if err != nil {
		t.Fatal(err)
	}
	ns := uniq("lease")
	var rts []*runtime.Runtime
	for i := range n {
		rt, err := runtime.New(reg, runtime.Options{Redis: rdb, Namespace: ns, LeaseTTL: ttl,
			Replica: "r" + strconv.Itoa(i), Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rt.Close() })
		rts = append(rts, rt)
	}
	return rts
}

func leaseToken(t *testing.T, value string) int64 {
	t.Helper()
	i := strings.LastIndexByte(value, '|')
	n, err := strconv.ParseInt(value[i+1:], 10, 64)
	if err != nil {
		t.Fatalf("lease value %q has no token", value)
	}
	return n
}

func TestLeaseAcquireRenewExpireRelease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const ttl = time.Second
	rts := newReplicas(t, 2, ttl, idleSchedule())
	a, b := rts[0], rts[1]

	if _, err := a.AcquireLease(ctx); err != nil {
		t.Fatal(err)
	}
	aValue, ok := a.LeaseValue()
	if !ok || !strings.HasPrefix(aValue, "r0|") {
		t.Fatalf("a holds %q (trusted %v), want r0|<token>", aValue, ok)
	}
	wait, err := b.AcquireLease(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := b.LeaseValue(); ok {
		t.Fatal("b acquired a lease a holds")
	}
	if wait <= 0 || wait > ttl+10*time.Millisecond {
		t.Errorf("b's next attempt in %s; want within the holder's remaining TTL %s", wait, ttl)
	}
	if err := a.RenewLease(ctx); err != nil {
		t.Fatal(err)
	}
	if v, ok := a.LeaseValue(); !ok || v != aValue {
		t.Fatalf("after renew a holds %q (%v), want %q", v, ok, aValue)
	}

	// a stops renewing (it crashed); b takes over once the key expires.
	start := time.Now()
	waitFor(t, 3*ttl, "b to take over the expired lease", func() bool {
		b.AcquireLease(ctx)
		_, ok := b.LeaseValue()
		return ok
	})
	if took := time.Since(start); took < ttl/2 {
		t.Errorf("b took over after %s, before a's lease (TTL %s, renewed just now) could expire", took, ttl)
	}
	bValue, _ := b.LeaseValue()
	if leaseToken(t, bValue) <= leaseToken(t, aValue) {
		t.Errorf("fencing token did not grow: a %q, b %q", aValue, bValue)
	}
	if _, ok := a.LeaseValue(); ok {
		t.Error("a still trusts a lease past its trust window")
	}
	// a wakes up and renews: refused, so it steps down.
	if err := a.RenewLease(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := a.LeaseValue(); ok {
		t.Error("a leads after its renewal was refused")
	}
	// a's release must not delete b's lease (compare-and-DEL).
	a.ReleaseLease(ctx)
	c, err := b.Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c.Leader != "r1" {
		t.Fatalf("after a's release the leader is %q, want r1", c.Leader)
	}
	b.ReleaseLease(ctx)
	if c, _ = b.Cluster(ctx); c.Leader != "" {
		t.Errorf("after b's release the leader is %q, want none", c.Leader)
	}
}

func TestFencedWriteRejectedAfterTakeover(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rts := newReplicas(t, 2, time.Second, idleSchedule())
	a, b := rts[0], rts[1]
	a.AcquireLease(ctx)
	aValue, _ := a.LeaseValue()
	cursor := time.Date(2026, 11, 29, 3, 17, 0, 0, time.UTC)
	if ok, err := a.CommitCursor(ctx, aValue, "nightly", cursor); err != nil || !ok {
		t.Fatalf("holder's fenced commit: ok=%v err=%v", ok, err)
	}
	waitFor(t, 3*time.Second, "b to take over", func() bool {
		b.AcquireLease(ctx)
		_, ok := b.LeaseValue()
		return ok
	})
	// a, paused through the takeover, tries to move the cursor back.
	if ok, err := a.CommitCursor(ctx, aValue, "nightly", cursor.AddDate(0, 0, -1)); err != nil || ok {
		t.Fatalf("zombie's fenced commit: ok=%v err=%v, want rejected", ok, err)
	}
	got, err := sharedRedis(t).HGet(ctx, a.CursorsKey(), "nightly").Int64()
	if err != nil {
		t.Fatal(err)
	}
	if got != cursor.Unix() {
		t.Errorf("cursor is %d after the zombie's write, want %d", got, cursor.Unix())
	}
}

func TestPausedLeaderLateEnqueueIsNoop(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := idleSchedule()
	s.Queue = uniq("q")
	rts := newReplicas(t, 2, time.Second, s)
	a, b := rts[0], rts[1]
	sched, _ := a.Registry().Lookup("nightly")
	occ := sched.Occurrence(time.Date(2026, 11, 29, 3, 17, 0, 0, time.UTC))
	if err := b.Enqueue(ctx, occ); err != nil { // the new holder's enqueue
		t.Fatal(err)
	}
	if err := a.Enqueue(ctx, occ); err != nil { // the zombie's, late
		t.Fatalf("late enqueue of an enqueued occurrence: %v, want a silent no-op", err)
	}
	insp := asynq.NewInspectorFromRedisClient(sharedRedis(t))
	info, err := insp.GetQueueInfo(s.Queue)
	if err != nil {
		t.Fatal(err)
	}
	if info.Size != 1 {
		t.Errorf("queue holds %d tasks after two enqueues of one occurrence, want 1", info.Size)
	}
}
