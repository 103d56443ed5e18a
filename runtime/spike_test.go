package runtime_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
	"github.com/belfry/belfry/runtime/internal/store"
	"github.com/hibiken/asynq"
)

// More schedules due at once than one dispatch takes (4,096): the batches
// enqueue every slot once, and the commit that follows them advances every
// cursor and records every slot; the paused ones, in whichever batch, are
// recorded paused and not enqueued.
func TestASpikeLargerThanABatchIsEnqueuedAndCommittedOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := sharedRedis(t)
	ns, queue := uniq("ns"), uniq("q")
	const n = 6000
	// Far enough ahead that the runtime has read its schedules before the
	// slot, on a loaded machine too: a schedule first seen after its slot
	// starts from the next one.
	due := time.Now().Add(10 * time.Second).Truncate(time.Second).UTC()
	expr := fmt.Sprintf("%d %d %d * * *", due.Second(), due.Minute(), due.Hour())
	scheds := make([]registry.Schedule, n)
	for i := range scheds {
		scheds[i] = registry.Schedule{Name: fmt.Sprintf("spike-%04d", i), Expr: expr, Queue: queue,
			Handler: func(context.Context, registry.Occurrence) error { return nil }}
	}
	reg := registry.MustNew(scheds...)
	rt, err := runtime.New(reg, runtime.Options{Redis: rdb, Namespace: ns, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	paused := map[string]bool{}
	for i := 7; i < n; i += 500 {
		paused[scheds[i].Name] = true
		if err := rt.Pause(ctx, scheds[i].Name, "spike test"); err != nil {
			t.Fatal(err)
		}
	}
	runUntilTheEnd(t, rt)
	keys := store.NewKeys(ns)
	want := strconv.FormatInt(due.Unix(), 10)
	waitFor(t, 30*time.Second, "every slot's step to be committed", func() bool {
		counters, err := rdb.HGetAll(ctx, keys.Counters()).Result()
		if err != nil {
			return false
		}
		for _, s := range scheds {
			counter := "enqueued"
			if paused[s.Name] {
				counter = "paused"
			}
			if store.ParseCounters(counters[s.Name])[counter] != 1 {
				return false
			}
		}
		return true
	})
	counters := rdb.HGetAll(ctx, keys.Counters()).Val()
	for name := range paused {
		if n := store.ParseCounters(counters[name])["enqueued"]; n != 0 {
			t.Errorf("paused %s was enqueued %d times", name, n)
		}
	}
	cursors := rdb.HGetAll(ctx, keys.Cursors).Val()
	for _, s := range scheds {
		if cursors[s.Name] != want {
			t.Fatalf("cursor of %s = %q, want the slot %s", s.Name, cursors[s.Name], want)
		}
		if n := rdb.ZCard(ctx, keys.History(s.Name)).Val(); n != 1 {
			t.Fatalf("%s has %d records, want 1", s.Name, n)
		}
	}
	info, err := asynq.NewInspectorFromRedisClient(rdb).GetQueueInfo(queue)
	if err != nil {
		t.Fatal(err)
	}
	if info.Size != n-len(paused) {
		t.Errorf("queue holds %d tasks, want %d", info.Size, n-len(paused))
	}
}
