package redisengine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/belfry/belfry/runtime/engine"
	"github.com/belfry/belfry/runtime/internal/pipeline"
	"github.com/belfry/belfry/runtime/internal/redisengine"
	"github.com/belfry/belfry/runtime/internal/redistest"
)

// An enqueue raises its schedule's cursor and last ID in the same write,
// is inserted once however often it is sent, and under a fence whose term
// has ended is refused, the fence rejected and nothing inserted.
func TestEnqueueAllIsFencedIdempotentAndRaisesTheCursor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Shared(t)
	queue := redistest.Uniq("q")
	e := redisengine.New(redisengine.Config{Client: rdb, Namespace: redistest.Uniq("ns"), HistoryLimit: 10,
		RecordTTL: time.Hour, Replica: "r0", LeaseTTL: 2 * time.Second})
	if _, err := e.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	term, leading := e.Current()
	if !leading {
		t.Fatal("the engine does not lead after Acquire")
	}
	id := redistest.Uniq("occ")
	item := engine.Enqueue{Task: engine.Task{Type: "nightly", ID: id, Queue: queue, Retention: time.Minute},
		Cursor: engine.CursorMark{Schedule: "nightly", Slot: 1000, LastID: id}}
	for i, wantInserted := range []bool{true, false} {
		fence := &engine.Fence{Term: term}
		res := e.EnqueueAll(ctx, fence, []engine.Enqueue{item})[0]
		if res.Err != nil || res.Inserted != wantInserted || fence.Rejected() {
			t.Fatalf("send %d: %+v, fence rejected %v; want inserted %v, no error", i+1, res, fence.Rejected(), wantInserted)
		}
	}
	cursors, ok, err := e.Cursors(ctx, []string{"nightly"})
	if err != nil || !ok[0] || cursors[0] != 1000 {
		t.Errorf("cursor %v (known %v, %v); want 1000 raised with the enqueue", cursors, ok, err)
	}
	if last, err := e.LastID(ctx, "nightly"); last != id || err != nil {
		t.Errorf("last ID %q (%v); want %q", last, err, id)
	}
	if in, err := e.TaskExists(ctx, queue, id); !in || err != nil {
		t.Errorf("TaskExists: %v, %v; want the task in", in, err)
	}
	if running, err := e.TaskRunning(ctx, queue, id); !running || err != nil {
		t.Errorf("TaskRunning: %v, %v; want the pending task running", running, err)
	}

	stale := &engine.Fence{Term: term + "-ended"}
	zombie := engine.Enqueue{Task: engine.Task{Type: "nightly", ID: redistest.Uniq("occ"), Queue: queue, Retention: time.Minute},
		Cursor: engine.CursorMark{Schedule: "nightly", Slot: 2000}}
	res := e.EnqueueAll(ctx, stale, []engine.Enqueue{zombie})[0]
	if !errors.Is(res.Err, pipeline.ErrFenced) || res.Inserted || !stale.Rejected() {
		t.Errorf("an ended term's enqueue: %+v, fence rejected %v; want refused (ErrFenced) and the fence rejected", res, stale.Rejected())
	}
	if in, err := e.TaskExists(ctx, queue, zombie.Task.ID); in || err != nil {
		t.Errorf("the refused task is in (%v, %v)", in, err)
	}
	if cursors, _, _ := e.Cursors(ctx, []string{"nightly"}); cursors[0] != 1000 {
		t.Errorf("the refused enqueue moved the cursor to %d", cursors[0])
	}
}
