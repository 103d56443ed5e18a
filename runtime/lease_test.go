package runtime_test

import (
	"context"
	"strconv"
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
