package runtime_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/belfry/belfry/internal/redistest"
	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
	"github.com/belfry/belfry/runtime/internal/store"
	"github.com/hibiken/asynq"
)

// An enqueue no replica acknowledged, whose task a failover then lost
// before any worker took it, is enqueued again, under the same ID, by the
// leader that made it once a replica acknowledges again: the slot runs
// once, and no loss is recorded. The failover's loss is staged on the
// primary itself: while its replica is stopped, the task of the enqueue
// the runtime names as unacknowledged and the cursor it raised are taken
// back, as a promoted replica that never had them would lack them.
func TestAnUnacknowledgedEnqueueLostBeforeItRanIsEnqueuedAgain(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := redistest.StartSentinel(t, redistest.SentinelOptions{Sentinels: 1})
	runs := newTaskRuns()
	queue, ns := uniq("q"), uniq("ns")
	reg := registry.MustNew(registry.Schedule{Name: "tick", Expr: "* * * * * *", Queue: queue, Handler: runs.handler})
	var logs syncBuffer
	unacked := make(chan string, 100)
	rt, err := runtime.New(reg, runtime.Options{Redis: s.Client(t), Namespace: ns, LeaseTTL: 3 * time.Second,
		EnqueueObserver: unackedEnqueues(unacked),
		Logger:          slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	runUntilTheEnd(t, rt)
	t.Cleanup(func() { t.Logf("runtime log:\n%s", logs.String()) })
	waitFor(t, 10*time.Second, "the runtime to schedule", rt.Scheduling)

	primary := s.Servers[0].Client(t)
	inspector := asynq.NewInspectorFromRedisClient(primary)
	s.Servers[1].Pause()
	t.Cleanup(s.Servers[1].Resume) // a stopped server would hold the cleanup
	var id string
	select {
	case id = <-unacked:
	case <-ctx.Done():
		t.Fatal("no enqueue went unacknowledged while the replica was stopped")
	}
	if _, err := inspector.GetTaskInfo(queue, id); err != nil {
		t.Fatalf("the unacknowledged enqueue's task %s is not on the primary: %v", id, err)
	}
	if err := inspector.DeleteTask(queue, id); err != nil {
		t.Fatal(err)
	}
	slot, err := strconv.ParseInt(id[strings.LastIndexByte(id, ':')+1:], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	// The cursor, and the mark the enqueue raised beside the task in its
	// queue's slot, which a promoted replica without the task lacks too.
	if err := primary.HSet(ctx, store.NewKeys(ns).Cursors, "tick", slot-1).Err(); err != nil {
		t.Fatal(err)
	}
	if err := primary.HSet(ctx, store.NewQueueKeys(ns, queue).Cursors, "tick", slot-1).Err(); err != nil {
		t.Fatal(err)
	}
	s.Servers[1].Resume()
	startWorker(t, s.Client(t), queue, func(mux *asynq.ServeMux) { rt.RegisterHandlers(mux) })

	waitFor(t, 20*time.Second, "the lost occurrence "+id+" to run", func() bool {
		n, _ := runsOf(runs, id)
		return n > 0
	})
	if recorded, _ := rt.Redis().LostWrites(ctx); len(recorded) != 0 {
		t.Errorf("losses recorded: %+v; want none, the occurrences enqueued again", recorded)
	}
	waitFor(t, 10*time.Second, "a later slot to run", func() bool {
		bySlot, _ := runs.bySlot("tick")
		for later := range bySlot {
			if later > slot+1 {
				return true
			}
		}
		return false
	})
	if n, _ := runsOf(runs, id); n != 1 {
		t.Errorf("%s ran %d times, want once", id, n)
	}
	if !strings.Contains(logs.String(), "enqueuing it again") {
		t.Errorf("no log line saying the occurrence was enqueued again:\n%s", logs.String())
	}
}

// runsOf is how often the task with id ran.
func runsOf(tr *taskRuns, id string) (int, bool) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	n, ok := tr.byID[id]
	return n, ok
}

// unackedEnqueues is an EnqueueObserver that sends the ID of each
// occurrence whose enqueue no replica acknowledged.
type unackedEnqueues chan<- string

func (u unackedEnqueues) BeforeEnqueue(_ context.Context, _ *registry.Schedule, occ registry.Occurrence) (map[string]string, func(bool, error)) {
	return nil, func(_ bool, err error) {
		if errors.Is(err, runtime.ErrNotAcked) {
			select {
			case u <- occ.ID:
			default:
			}
		}
	}
}
