package runtime_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
	"github.com/belfry/belfry/runtime/internal/store"
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

func TestPausedLeaderLateEnqueueIsNoop(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := idleSchedule()
	s.Queue = uniq("q")
	rts := newReplicas(t, 2, time.Second, s)
	a, b := rts[0], rts[1]
	sched, _ := a.Registry().Lookup("nightly")
	occ := sched.Occurrence(a.Namespace(), time.Date(2026, 11, 29, 3, 17, 0, 0, time.UTC))
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

// The enqueue is fenced: an ex-leader's enqueue that reaches Redis after a
// takeover is refused by Redis even when nothing else would stop it — here
// the slot's task is gone (it finished and its retention lapsed), so the
// task ID reserves nothing.
func TestLateEnqueueFromAnExLeaderIsRefusedAfterRetention(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := idleSchedule()
	s.Queue = uniq("q")
	rt := newReplicas(t, 1, time.Second, s)[0]
	rdb := sharedRedis(t)
	leaseKey := store.NewKeys(rt.Namespace()).Lease
	sched, _ := rt.Registry().Lookup("nightly")
	occ := sched.Occurrence(rt.Namespace(), time.Date(2026, 11, 29, 3, 17, 0, 0, time.UTC))
	rdb.Set(ctx, leaseKey, "old|1", time.Minute)
	if err := rt.EnqueueAsHolder(ctx, "old|1", occ); err != nil {
		t.Fatalf("the holder's own enqueue: %v", err)
	}
	insp := asynq.NewInspectorFromRedisClient(rdb)
	if err := insp.DeleteTask(s.Queue, occ.ID); err != nil { // ran, and its retention lapsed
		t.Fatal(err)
	}
	rdb.Set(ctx, leaseKey, "new|2", time.Minute) // another replica took over
	if err := rt.EnqueueAsHolder(ctx, "old|1", occ); !errors.Is(err, store.ErrNotLeader) {
		t.Fatalf("the ex-leader's late enqueue: %v, want refused as not the leader", err)
	}
	if _, err := insp.GetTaskInfo(s.Queue, occ.ID); !errors.Is(err, asynq.ErrTaskNotFound) {
		t.Errorf("the slot was enqueued again by an ex-leader: %v", err)
	}
}

// A finished task's ID stays reserved for a lease TTL only: the cursor the
// enqueue raises, not the ID, stops the next holder from enqueueing a slot
// again (TestACrashBetweenEnqueueAndCommitRunsNoSlotTwice), and a per-second
// schedule must not keep grace's worth of finished tasks in Redis.
func TestATasksIDIsReservedForALeaseTTL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := idleSchedule()
	s.Queue = uniq("q")
	s.Grace = 4 * time.Minute
	rt := newReplicas(t, 1, time.Second, s)[0]
	rdb := sharedRedis(t)
	rdb.Set(ctx, store.NewKeys(rt.Namespace()).Lease, "r0|1", time.Minute)
	sched, _ := rt.Registry().Lookup("nightly")
	occ := sched.Occurrence(rt.Namespace(), time.Date(2026, 11, 29, 3, 17, 0, 0, time.UTC))
	if err := rt.EnqueueAsHolder(ctx, "r0|1", occ); err != nil {
		t.Fatal(err)
	}
	info, err := asynq.NewInspectorFromRedisClient(rdb).GetTaskInfo(s.Queue, occ.ID)
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Second; info.Retention != want {
		t.Errorf("retention %s, want the lease TTL %s", info.Retention, want)
	}
}
