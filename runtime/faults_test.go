package runtime_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
	"github.com/belfry/belfry/runtime/internal/store"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// failOnce fails the first fenced commit after it reached Redis: the
// enqueues before it happened, the cursor did not move.
type failOnce struct{ failed atomic.Bool }

func (h *failOnce) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *failOnce) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *failOnce) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if len(args) > 1 && args[0] == "evalsha" && args[1] == store.CommitScriptHash() && h.failed.CompareAndSwap(false, true) {
			cmd.SetErr(errors.New("injected: connection reset"))
			return cmd.Err()
		}
		return next(ctx, cmd)
	}
}

func TestFailedCommitDoesNotStopTheSchedule(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: sharedRedisAddr()})
	t.Cleanup(func() { rdb.Close() })
	faults := &failOnce{}
	rdb.AddHook(faults)
	queue := uniq("q")
	exec := newExecutions()
	reg := registry.MustNew(registry.Schedule{Name: "tick", Expr: "* * * * * *", Queue: queue, Handler: exec.handler})
	rt, err := runtime.New(reg, runtime.Options{Redis: rdb, Namespace: uniq("ns"), LeaseTTL: 2 * time.Second, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	startWorker(t, sharedRedis(t), queue, func(mux *asynq.ServeMux) { rt.RegisterHandlers(mux) })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { rt.Run(ctx); close(done) }()
	waitFor(t, 10*time.Second, "the injected commit failure", faults.failed.Load)
	failedAt := time.Now()
	waitFor(t, 10*time.Second, "slots after the failure to run", func() bool {
		n := 0
		for slot := range exec.slots("tick") {
			if time.Unix(slot, 0).After(failedAt) {
				n++
			}
		}
		return n >= 3
	})
	cancel()
	<-done
	assertOncePerSlot(t, reg.Schedules()[0], exec.slots("tick"))
}

func TestStalledHolderResumesAfterItsNextRenewal(t *testing.T) {
	t.Parallel()
	rdb := sharedRedis(t)
	// A long TTL: the backstop (one renewal period) must not be what wakes
	// the scheduler; the renewal itself must.
	c := newCluster(t, rdb, 1, runtime.Options{LeaseTTL: 30 * time.Second},
		registry.Schedule{Name: "tick", Expr: "* * * * * *"})
	rt := c.rts[0]
	waitFor(t, 5*time.Second, "the replica to lead", rt.Leadership().Leading)
	waitFor(t, 5*time.Second, "the loop to hold leader state", rt.Scheduling)
	rt.LapseTrust()
	if rt.Leadership().Leading() {
		t.Fatal("the holder still trusts a lapsed lease")
	}
	waitFor(t, 5*time.Second, "the loop to stand down", func() bool { return !rt.Scheduling() })
	lapsed := time.Now()
	if err := rt.RenewLease(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "slots after the stall to run", func() bool {
		for slot := range c.executed.slots("tick") {
			if time.Unix(slot, 0).After(lapsed.Add(time.Second)) {
				return true
			}
		}
		return false
	})
}

// lapseOnFirstEnqueue ends the holder's trust window while its first
// dispatch is under way, between one occurrence's enqueue and the next: a
// stall that falls inside a dispatch rather than between two.
type lapseOnFirstEnqueue struct {
	rt     atomic.Pointer[runtime.Runtime]
	lapsed atomic.Bool
}

func (o *lapseOnFirstEnqueue) BeforeEnqueue(context.Context, *registry.Schedule, registry.Occurrence) (map[string]string, func(bool, error)) {
	if rt := o.rt.Load(); rt != nil && o.lapsed.CompareAndSwap(false, true) {
		rt.LapseTrust()
	}
	return nil, nil
}

// A trust window that lapses in the middle of a dispatch is the lease's to
// restore, as one that lapses between dispatches is: the loop finds it at
// its next look, before a write that Redis could refuse, so the lease is
// not given up, and the holder's next renewal resumes scheduling. (Before,
// the loop took its own look for a refused write and stepped down, and
// the renewal found no lease to renew.)
func TestTrustLapsingMidDispatchResumesAfterItsNextRenewal(t *testing.T) {
	t.Parallel()
	observer := &lapseOnFirstEnqueue{}
	// Two schedules due each second: one dispatch enqueues both, and the
	// trust lapses between the two enqueues. A long TTL, so that only the
	// renewal below, not the lease's own, can restore it in time.
	c := newCluster(t, sharedRedis(t), 1, runtime.Options{LeaseTTL: 30 * time.Second, EnqueueObserver: observer},
		registry.Schedule{Name: "a", Expr: "* * * * * *"}, registry.Schedule{Name: "b", Expr: "* * * * * *"})
	rt := c.rts[0]
	waitFor(t, 5*time.Second, "the replica to lead", rt.Leadership().Leading)
	observer.rt.Store(rt)
	waitFor(t, 5*time.Second, "the trust to lapse mid-dispatch", observer.lapsed.Load)
	waitFor(t, 5*time.Second, "the loop to stand down", func() bool { return !rt.Scheduling() })
	lapsed := time.Now()
	if err := rt.RenewLease(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !rt.Leadership().Leading() {
		t.Fatal("the renewal did not restore the lease: the loop gave it up when its trust lapsed")
	}
	waitFor(t, 5*time.Second, "slots after the stall to run", func() bool {
		for slot := range c.executed.slots("b") {
			if time.Unix(slot, 0).After(lapsed.Add(time.Second)) {
				return true
			}
		}
		return false
	})
}
