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
