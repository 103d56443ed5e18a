package redisengine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/belfry/belfry/internal/redistest"
	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/engine"
	"github.com/belfry/belfry/runtime/internal/pipeline"
	"github.com/belfry/belfry/runtime/internal/redisengine"
)

// An enqueue raises its schedule's cursor and last ID in the same write
// (their marks in the queue's slot, read with the cursors),
// is inserted once however often it is sent, and under a fence whose term
// has ended is refused, the fence rejected and nothing inserted.
func TestEnqueueAllIsFencedIdempotentAndRaisesTheCursor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, term, queue := leadingEngine(t)
	if err := e.InitCursors(ctx, term, 500, []string{"nightly"}); err != nil {
		t.Fatal(err)
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

// Enqueues sent at once under fences of their own share a pipeline, which
// sends each fence's tasks together: when the term has ended, every
// caller's fence is rejected and every item says the engine refused it as
// not the leader's, not only the first caller's.
func TestEveryRefusedFenceOfAPipelinedBatchIsRejected(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, term, queue := leadingEngine(t)
	const callers, rounds = 16, 10
	for round := range rounds {
		fences := make([]*engine.Fence, callers)
		results := make([]engine.Result, callers)
		done := make(chan int)
		for i := range callers {
			fences[i] = &engine.Fence{Term: term + "-ended"}
			go func() {
				item := engine.Enqueue{Task: engine.Task{Type: "nightly", ID: redistest.Uniq("occ"), Queue: queue, Retention: time.Minute}}
				results[i] = e.EnqueueAll(ctx, fences[i], []engine.Enqueue{item})[0]
				done <- i
			}()
		}
		for range callers {
			<-done
		}
		for i := range callers {
			if res := results[i]; res.Inserted || !errors.Is(res.Err, engine.ErrNotLeader) || !fences[i].Rejected() {
				t.Fatalf("round %d, caller %d: %+v, fence rejected %v; want refused as not the leader's, fence rejected",
					round, i, res, fences[i].Rejected())
			}
		}
	}
}

// An enqueue whose mark is at the cursor already (overlap=buffer_one
// enqueues the waiting slot so, the cursor having passed it) is the last
// ID until a commit says otherwise: a holder that stops between the
// enqueue and its commit leaves the next one the enqueued task's ID, not
// the waiting slot's, which it would enqueue again.
func TestAnEnqueueMarkedAtTheCursorIsTheLastID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, term, queue := leadingEngine(t)
	waiting := "occ-first 1000"
	if err := e.Commit(ctx, term, []engine.Commit{{Name: "nightly", Cursor: 1000, LastID: waiting}}); err != nil {
		t.Fatal(err)
	}
	if last, err := e.LastID(ctx, "nightly"); last != waiting || err != nil {
		t.Fatalf("last ID %q (%v); want the committed %q", last, err, waiting)
	}
	id := redistest.Uniq("occ")
	res := e.EnqueueAll(ctx, &engine.Fence{Term: term}, []engine.Enqueue{{
		Task:   engine.Task{Type: "nightly", ID: id, Queue: queue, Retention: time.Minute},
		Cursor: engine.CursorMark{Schedule: "nightly", Slot: 1000, LastID: id}}})[0]
	if res.Err != nil || !res.Inserted {
		t.Fatalf("enqueue: %+v", res)
	}
	if last, err := e.LastID(ctx, "nightly"); last != id || err != nil {
		t.Errorf("last ID %q (%v); want the enqueued %q", last, err, id)
	}
}

// leadingEngine is an engine on a namespace of its own that leads, its
// term, and a queue of its own, that of its registry's schedule
// "nightly".
func leadingEngine(t *testing.T) (e *redisengine.Engine, term, queue string) {
	t.Helper()
	queue = redistest.Uniq("q")
	reg := registry.MustNew(registry.Schedule{Name: "nightly", Expr: "17 3 * * *", Queue: queue,
		Handler: func(context.Context, registry.Occurrence) error { return nil }})
	e = redisengine.New(redisengine.Config{Client: redistest.Shared(t), Namespace: redistest.Uniq("ns"), HistoryLimit: 10,
		RecordTTL: time.Hour, Replica: "r0", LeaseTTL: 2 * time.Second, Registry: reg})
	if _, err := e.Acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	term, leading := e.Current()
	if !leading {
		t.Fatal("the engine does not lead after Acquire")
	}
	return e, term, queue
}
