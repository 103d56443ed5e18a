package pipeline_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/belfry/belfry/internal/redistest"
	"github.com/belfry/belfry/runtime/internal/pipeline"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// The hook sees asynq's enqueues of its queue and belfry's batches of
// them, inserted or conflicting, and the WAITs the client sends; nothing
// else, not the worker's start mark on a task's hash.
func TestEnqueueHookSeesInsertsConflictsAndWaits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redistest.SharedAddr()})
	defer rdb.Close()
	queue := redistest.Uniq("enqueue-hook") // shared Redis: a rerun must not meet an earlier run's task IDs
	var mu sync.Mutex
	var seen []redistest.Enqueue
	var acks []redistest.Ack
	rdb.AddHook(redistest.EnqueueHook(queue, func(e redistest.Enqueue) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, e)
	}, func(a redistest.Ack) {
		mu.Lock()
		defer mu.Unlock()
		acks = append(acks, a)
	}))
	client := asynq.NewClientFromRedisClient(rdb)
	insp := asynq.NewInspectorFromRedisClient(rdb)
	t.Cleanup(func() { insp.DeleteQueue(queue, true); insp.DeleteQueue(queue+"-other", true) })

	task := asynq.NewTask("hooked", nil)
	if _, err := client.Enqueue(task, asynq.TaskID("a"), asynq.Queue(queue)); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Enqueue(task, asynq.TaskID("a"), asynq.Queue(queue)); !errors.Is(err, asynq.ErrTaskIDConflict) {
		t.Fatalf("second enqueue of one ID: %v, want a conflict", err)
	}
	if _, err := client.Enqueue(task, asynq.TaskID("b"), asynq.Queue(queue+"-other")); err != nil {
		t.Fatal(err)
	}
	// In a MULTI/EXEC, as the runtime's fenced enqueues go.
	if _, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Eval(ctx, "return 1", []string{"asynq:{" + queue + "}:t:c", "asynq:{" + queue + "}:pending"})
		p.Set(ctx, "enqueue-hook-unrelated", "1", 0)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// A batch: one reply per task key, the keys after them not tasks.
	if err := rdb.Eval(ctx, "return {1, 0}", []string{"asynq:{" + queue + "}:t:d", "asynq:{" + queue + "}:t:e",
		"asynq:{" + queue + "}:pending"}).Err(); err != nil {
		t.Fatal(err)
	}
	// belfry's own batch, as the leader sends it.
	batch := pipeline.NewClient(rdb).EnqueueAll(ctx, []pipeline.Item{
		{Task: pipeline.Task{Type: "hooked", ID: "f", Queue: queue}},
		{Task: pipeline.Task{Type: "hooked", ID: "a", Queue: queue}},
	})
	for _, r := range batch {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	// A worker's start mark takes the task's key first and answers 1 or
	// 0 too; it enqueues nothing.
	mark := pipeline.TaskKey(queue, "a")
	if _, _, err := (pipeline.Acks{}).ClaimStart(ctx, rdb, mark, 0, "token", "", time.Minute); err != nil {
		t.Fatal(err)
	}
	if ours, err := pipeline.RenewStart(ctx, rdb, mark, 0, "token", time.Minute); err != nil || !ours {
		t.Fatalf("renewing the start mark: ours=%v err=%v", ours, err)
	}
	if ours, err := pipeline.RenewStart(ctx, rdb, mark, 0, "another token", time.Minute); err != nil || ours {
		t.Fatalf("renewing another's start mark: ours=%v err=%v", ours, err)
	}
	if ours, err := (pipeline.Acks{}).EndStart(ctx, rdb, mark, 0, "token", pipeline.StartSucceeded); err != nil || !ours {
		t.Fatalf("ending the start mark: ours=%v err=%v", ours, err)
	}
	if err := rdb.Wait(ctx, 0, 0).Err(); err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	defer mu.Unlock()
	var got []redistest.Enqueue
	for _, e := range seen {
		if e.At.IsZero() {
			t.Errorf("enqueue of %s seen without its time", e.TaskID)
		}
		got = append(got, redistest.Enqueue{TaskID: e.TaskID, Inserted: e.Inserted})
	}
	want := []redistest.Enqueue{{TaskID: "a", Inserted: true}, {TaskID: "a", Inserted: false}, {TaskID: "c", Inserted: true},
		{TaskID: "d", Inserted: true}, {TaskID: "e", Inserted: false}, {TaskID: "f", Inserted: true}, {TaskID: "a", Inserted: false}}
	if !slices.Equal(got, want) {
		t.Errorf("enqueues seen %+v, want %+v", got, want)
	}
	if len(acks) != 1 || acks[0].Err != nil {
		t.Errorf("acks seen %+v, want the one WAIT's reply", acks)
	}
}
