package pipeline_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/belfry/belfry/runtime/internal/pipeline"
	"github.com/belfry/belfry/runtime/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// A mark rides in its enqueue's transaction: set when the task went in or
// was already there, never when the call did not leave it in Redis (the
// script failed, or the fence refused it).
func TestAMarkIsWrittenWithItsEnqueueOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Shared(t)
	pc := pipeline.NewClient(rdb)
	lease, task, cursors, lastID := redistest.Uniq("lease"), redistest.Uniq("task"), redistest.Uniq("cursors"), redistest.Uniq("lastid")
	rdb.Set(ctx, lease, "r0|1", time.Minute)
	holder := &pipeline.Fence{Key: lease, Value: "r0|1"}
	enqueue := func(f *pipeline.Fence, key string, slot int64) error {
		m := &pipeline.Mark{Exists: key, Hash: cursors, Field: "tick", Value: slot, Also: lastID, AlsoValue: key}
		return insertScript.Run(pipeline.WithMark(pipeline.WithFence(ctx, f), m), pc, []string{key}, "x").Err()
	}
	cursor := func() string { return rdb.HGet(ctx, cursors, "tick").Val() }
	if err := enqueue(holder, task+":10", 10); err != nil {
		t.Fatal(err)
	}
	if cursor() != "10" || rdb.HGet(ctx, lastID, "tick").Val() != task+":10" {
		t.Fatalf("after the enqueue of slot 10: cursor %q, last ID %q", cursor(), rdb.HGet(ctx, lastID, "tick").Val())
	}
	// Already there (a conflict): still handled, so the mark goes up.
	rdb.Set(ctx, task+":11", "x", time.Minute)
	if err := enqueue(holder, task+":11", 11); err != nil {
		t.Fatal(err)
	}
	if cursor() != "11" {
		t.Errorf("after a conflicting enqueue of slot 11: cursor %q, want 11", cursor())
	}
	// A call that leaves nothing behind marks nothing.
	failing := redis.NewScript(`return redis.error_reply('OOM command not allowed')`)
	m := &pipeline.Mark{Exists: task + ":12", Hash: cursors, Field: "tick", Value: 12}
	if err := failing.Run(pipeline.WithMark(pipeline.WithFence(ctx, holder), m), pc, []string{task + ":12"}).Err(); err == nil {
		t.Fatal("the failing script succeeded")
	}
	if cursor() != "11" {
		t.Errorf("a failed enqueue moved the cursor to %q", cursor())
	}
	// Nor one the fence refuses.
	rdb.Set(ctx, lease, "r1|2", time.Minute)
	if err := enqueue(holder, task+":13", 13); !errors.Is(err, pipeline.ErrFenced) {
		t.Fatalf("the ex-holder's enqueue: %v, want ErrFenced", err)
	}
	if cursor() != "11" {
		t.Errorf("a refused enqueue moved the cursor to %q", cursor())
	}
}

// Marks of a batch (the spike) go in one script at the end of its
// transaction, each for its own schedule.
func TestMarksOfABatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Shared(t)
	pc := pipeline.NewClient(rdb)
	lease, task, cursors := redistest.Uniq("lease"), redistest.Uniq("task"), redistest.Uniq("cursors")
	rdb.Set(ctx, lease, "r0|1", time.Minute)
	fence := &pipeline.Fence{Key: lease, Value: "r0|1"}
	const callers = 300
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			key := task + ":" + string(rune('a'+i%26)) + string(rune('a'+i/26))
			m := &pipeline.Mark{Exists: key, Hash: cursors, Field: key, Value: int64(i)}
			if err := insertScript.Run(pipeline.WithMark(pipeline.WithFence(ctx, fence), m), pc, []string{key}, "x").Err(); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := rdb.HLen(ctx, cursors).Val(); n != callers {
		t.Errorf("%d marks, want %d", n, callers)
	}
}
