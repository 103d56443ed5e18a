package runtime_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
	"github.com/belfry/belfry/runtime/internal/clock"
	"github.com/belfry/belfry/runtime/internal/store"
	"github.com/hibiken/asynq"
)

// Redis loses its data under a running leader (FLUSHALL; a restart without
// persistence is the same): the cursors and task IDs are gone. The leader
// notices when it takes the lease again, moves every cursor past what any
// replica may have enqueued, and records the window. No slot runs twice.
func TestLostDataIsDetectedAndNoSlotRunsTwice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := startPrivateRedis(t)
	rdb := srv.Client(t)
	queue, ns := uniq("q"), uniq("ns")
	exec := newExecutions()
	reg := registry.MustNew(registry.Schedule{Name: "tick", Expr: "* * * * * *", Queue: queue, Handler: exec.handler})
	rt, err := runtime.New(reg, runtime.Options{Redis: rdb, Namespace: ns, LeaseTTL: time.Second, SkewMargin: 2 * time.Second,
		Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	startWorker(t, rdb, queue, func(mux *asynq.ServeMux) { rt.RegisterHandlers(mux) })
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { rt.Run(runCtx); close(done) }()
	t.Cleanup(func() { cancel(); <-done; rt.Close() })
	waitFor(t, 10*time.Second, "runs before the loss", func() bool { return len(exec.slots("tick")) >= 3 })

	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	// asynq's workers re-announce their queue on their own.
	waitFor(t, 10*time.Second, "the loss to be detected", func() bool {
		lost, _ := rt.LostWrites(ctx)
		return len(lost) == 1
	})
	lost, _ := rt.LostWrites(ctx)
	l := lost[0]
	if !strings.Contains(l.Reason, "epoch is gone") || !l.To.After(l.From) || l.To.Sub(l.At) < 2*time.Second {
		t.Errorf("loss recorded as %+v; want the epoch reason and a window reaching SkewMargin past the detection", l)
	}
	waitFor(t, 15*time.Second, "runs after the window", func() bool {
		for slot := range exec.slots("tick") {
			if time.Unix(slot, 0).After(l.To) {
				return true
			}
		}
		return false
	})
	for slot, n := range exec.slots("tick") {
		if n > 1 {
			t.Errorf("slot %s ran %d times", time.Unix(slot, 0).UTC(), n)
		}
	}
	if h := rt.Health(ctx); h.Status != "unhealthy" || !strings.Contains(strings.Join(h.Problems, ";"), "may not have run") {
		t.Errorf("health after the loss: %+v", h)
	}
}

// A failover to a replica that was behind shows as a fencing token no
// larger than one this replica held: detected, and the cursors moved.
func TestATokenGoingBackwardsIsALoss(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := sharedRedis(t)
	ns := uniq("ns")
	keys := store.NewKeys(ns)
	reg := registry.MustNew(idleSchedule())
	// Token 5 was handed out before; this replica leads with 6.
	rdb.Set(ctx, keys.Token, 5, 0)
	rt, err := runtime.New(reg, runtime.Options{Redis: rdb, Namespace: ns, LeaseTTL: time.Second, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { rt.Run(runCtx); close(done) }()
	t.Cleanup(func() { cancel(); <-done; rt.Close() })
	waitFor(t, 5*time.Second, "the replica to lead", func() bool { return rt.IsLeader() && rt.Scheduling() })
	// The promoted replica had not seen the last writes: the counter and the
	// lease are older, the epoch survived.
	rdb.Set(ctx, keys.Token, 2, 0)
	rdb.Del(ctx, keys.Lease)
	waitFor(t, 10*time.Second, "the loss to be detected", func() bool {
		lost, _ := rt.LostWrites(ctx)
		return len(lost) == 1 && strings.Contains(lost[0].Reason, "fencing token went back from 6 to 3")
	})
}

// The same loss with skewed clocks: the leader runs 3s ahead, so before the
// flush it enqueued slots up to 3s in the future. The replica that takes
// over runs 3s behind; starting its fresh cursors from its own "now" would
// run those slots again, since their task IDs went with the flush.
func TestAFollowerThatTakesOverAfterALossRunsNoSlotTwice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := startPrivateRedis(t)
	rdb := srv.Client(t)
	queue, ns := uniq("q"), uniq("ns")
	exec := newExecutions()
	reg := registry.MustNew(registry.Schedule{Name: "tick", Expr: "* * * * * *", Queue: queue, Handler: exec.handler})
	var rts []*runtime.Runtime
	for i, offset := range []time.Duration{3 * time.Second, -3 * time.Second} {
		rt, err := runtime.NewWithClock(reg, runtime.Options{Redis: rdb, Namespace: ns, LeaseTTL: time.Second,
			SkewMargin: 4 * time.Second, Replica: "r" + string(rune('0'+i)), Logger: testLogger(t)}, clock.Offset(offset))
		if err != nil {
			t.Fatal(err)
		}
		rts = append(rts, rt)
	}
	startWorker(t, rdb, queue, func(mux *asynq.ServeMux) { rts[0].RegisterHandlers(mux) })
	ahead, behind := rts[0], rts[1]
	aheadCtx, stopAhead := context.WithCancel(ctx)
	behindCtx, stopBehind := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { ahead.Run(aheadCtx) })
	waitFor(t, 5*time.Second, "the replica ahead to lead", ahead.Scheduling)
	wg.Go(func() { behind.Run(behindCtx) })
	t.Cleanup(func() { stopAhead(); stopBehind(); wg.Wait(); ahead.Close(); behind.Close() })
	waitFor(t, 10*time.Second, "runs before the loss", func() bool { return len(exec.slots("tick")) >= 4 })

	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	stopAhead() // the replica ahead goes away; the one behind takes over
	waitFor(t, 10*time.Second, "the replica behind to lead", behind.Scheduling)
	took := time.Now()
	waitFor(t, 15*time.Second, "runs after the takeover", func() bool {
		for slot := range exec.slots("tick") {
			if time.Unix(slot, 0).After(took.Add(5 * time.Second)) {
				return true
			}
		}
		return false
	})
	for slot, n := range exec.slots("tick") {
		if n > 1 {
			t.Errorf("slot %s ran %d times", time.Unix(slot, 0).UTC(), n)
		}
	}
	if lost, _ := behind.LostWrites(ctx); len(lost) != 1 || lost[0].Replica != "r1" {
		t.Errorf("losses recorded: %+v, want one, by the replica behind", lost)
	}
}
