package runtime_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
	"github.com/belfry/belfry/runtime/internal/redistest"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// A failover can lose a worker's dequeue and keep the enqueue (a replica
// acknowledged it): the new primary hands the attempt, pending there, to
// a second worker while the first runs it. The test leaves Redis as such a
// failover does — a primary with a replica, the task moved back to pending
// under the running handler — and checks, with ReplicaAcks, that the
// second delivery does not run the attempt and ends as the first did: done
// when it succeeded, retried once (attempt 1, once) when it failed.
func TestAnAttemptDeliveredTwiceRunsOnce(t *testing.T) {
	t.Parallel()
	s := redistest.StartSentinel(t, redistest.SentinelOptions{Sentinels: 1})
	for _, firstFails := range []bool{false, true} {
		name := "first succeeds"
		if firstFails {
			name = "first fails"
		}
		t.Run(name, func(t *testing.T) { deliverTwice(t, s.Servers[0].Client(t), firstFails) })
	}
	t.Run("first interrupted", func(t *testing.T) { interruptFirst(t, s.Servers[0].Client(t)) })
}

// interruptFirst shuts the first delivery's worker down mid-run: asynq
// puts the task back as it was, same attempt, and that attempt's next
// delivery runs it (the mark does not stand in its way) long before the
// interrupted one's mark would have expired, and is not failed or retried.
func interruptFirst(t *testing.T, rdb redis.UniversalClient) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	queue := uniq("q")
	var attempts attemptLog
	entered := make(chan struct{})
	handler := func(ctx context.Context, occ registry.Occurrence) error {
		if attempts.note(ctx) {
			close(entered)
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}
	reg := registry.MustNew(registry.Schedule{Name: "job", Expr: "0 0 1 1 *", Queue: queue, Handler: handler})
	// A mark lasts a minute unless renewed: the next delivery may not
	// wait for it to expire.
	rt, err := runtime.New(reg, runtime.Options{Redis: rdb, Namespace: uniq("ns"), ReplicaAcks: 1, LeaseTTL: time.Minute, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	first := asynq.NewServerFromRedisClient(rdb, asynq.Config{
		Queues: map[string]int{queue: 1}, Concurrency: 1, TaskCheckInterval: 20 * time.Millisecond,
		ShutdownTimeout: 100 * time.Millisecond, Logger: quietAsynq{}, LogLevel: asynq.FatalLevel,
	})
	mux := asynq.NewServeMux()
	rt.RegisterHandlers(mux)
	if err := first.Start(mux); err != nil {
		t.Fatal(err)
	}
	occ := triggerAcked(ctx, t, rt, "job")
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("the first delivery never ran")
	}
	first.Shutdown()
	startWorker(t, rdb, queue, func(mux *asynq.ServeMux) { rt.RegisterHandlers(mux) })
	waitFor(t, 20*time.Second, "the task to complete", func() bool {
		return rdb.HGet(ctx, "asynq:{"+queue+"}:t:"+occ.ID, "state").Val() == "completed"
	})
	got := attempts.get()
	if !slices.Equal(got, []int{0, 0}) {
		t.Errorf("runs by attempt %v; want [0 0]: the interrupted attempt, then the same attempt to the end", got)
	}
}

func deliverTwice(t *testing.T, rdb redis.UniversalClient, firstFails bool) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	queue := uniq("q")
	var attempts attemptLog
	entered, release := make(chan struct{}), make(chan struct{})
	handler := func(ctx context.Context, occ registry.Occurrence) error {
		if !attempts.note(ctx) {
			return nil
		}
		close(entered)
		<-release
		if firstFails {
			return errors.New("the first attempt fails")
		}
		return nil
	}
	reg := registry.MustNew(registry.Schedule{Name: "job", Expr: "0 0 1 1 *", Queue: queue, MaxRetry: 1, Handler: handler})
	// A short mark TTL: the first run outlasts it, held by its renewals.
	rt, err := runtime.New(reg, runtime.Options{Redis: rdb, Namespace: uniq("ns"), ReplicaAcks: 1, LeaseTTL: 2 * time.Second, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	// The first worker has one slot, busy with the first delivery, so the
	// second delivery goes to the second worker.
	startWorkerN(t, rdb, queue, 1, func(mux *asynq.ServeMux) { rt.RegisterHandlers(mux) })
	occ := triggerAcked(ctx, t, rt, "job")
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("the first delivery never ran")
	}
	stageLostDequeue(ctx, t, rdb, queue, occ.ID)
	startWorker(t, rdb, queue, func(mux *asynq.ServeMux) { rt.RegisterHandlers(mux) })
	active := "asynq:{" + queue + "}:active"
	waitFor(t, 10*time.Second, "the second delivery to take the task", func() bool {
		ran := len(attempts.get()) > 1
		ids, _ := rdb.LRange(ctx, active, 0, -1).Result()
		return ran || slices.Contains(ids, occ.ID)
	})
	// Hold the first run past its mark's first expiry, by two of the
	// second delivery's longest waits between looks (a second): it must
	// keep waiting, as the first worker renews the mark.
	taskKey := "asynq:{" + queue + "}:t:" + occ.ID
	heldUntil := markExpiry(ctx, t, rdb, taskKey) + 2000
	waitFor(t, 10*time.Second, "Redis's clock to pass the mark's first expiry", func() bool {
		now, err := rdb.Time(ctx).Result()
		return err == nil && now.UnixMilli() > heldUntil
	})
	close(release)

	wantAttempts := []int{0}
	if firstFails {
		wantAttempts = []int{0, 1}
	}
	waitFor(t, 20*time.Second, "the task to complete", func() bool {
		return rdb.HGet(ctx, taskKey, "state").Val() == "completed"
	})
	// A second run of attempt 0 or a second retry would come within
	// moments of the completion; the asynq state says none is left to run.
	for _, list := range []string{"pending", "active", "retry", "scheduled"} {
		if n := queueLen(ctx, rdb, queue, list); n != 0 {
			t.Errorf("%d tasks still %s", n, list)
		}
	}
	got := attempts.get()
	if !slices.Equal(got, wantAttempts) {
		t.Errorf("runs by attempt %v; want %v", got, wantAttempts)
	}
	hist, err := rt.History(ctx, "job", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 1 || hist[0].Outcome != runtime.OutcomeSucceeded || hist[0].Attempt != wantAttempts[len(wantAttempts)-1] {
		t.Errorf("ledger %+v; want one record, succeeded at attempt %d", hist, wantAttempts[len(wantAttempts)-1])
	}
}

// attemptLog is the attempt of each run of a handler, in order.
type attemptLog struct {
	mu       sync.Mutex
	attempts []int
}

// note records a run and reports whether it is the first.
func (l *attemptLog) note(ctx context.Context) (first bool) {
	attempt, _ := asynq.GetRetryCount(ctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.attempts = append(l.attempts, attempt)
	return len(l.attempts) == 1
}

func (l *attemptLog) get() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.attempts)
}

// triggerAcked triggers a manual run, repeating the request (same key, as
// an operator would) while no replica acknowledges it in time: on a
// loaded machine a WAIT can outlast a short ReplicaAckTimeout.
func triggerAcked(ctx context.Context, t *testing.T, rt *runtime.Runtime, name string) registry.Occurrence {
	t.Helper()
	for {
		occ, err := rt.Trigger(ctx, name, "the-request")
		switch {
		case err == nil:
			return occ
		case !errors.Is(err, runtime.ErrNotAcked) || ctx.Err() != nil:
			t.Fatalf("triggering %s: %v", name, err)
		}
	}
}

// markExpiry reads the expiry (unix ms) of the task's running start mark.
func markExpiry(ctx context.Context, t *testing.T, rdb redis.UniversalClient, taskKey string) int64 {
	t.Helper()
	mark := rdb.HGet(ctx, taskKey, "belfry_start").Val()
	f := strings.Fields(mark)
	if len(f) != 4 || f[2] != "running" {
		t.Fatalf("start mark %q; want a running one", mark)
	}
	ms, err := strconv.ParseInt(f[3], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

// stageLostDequeue undoes a worker's dequeue of the task as a failover
// that lost it does (asynq v0.26's layout): off the active list and the
// lease set, back on the pending list, its state pending. The start mark
// stays: a replica acknowledged it before the handler started.
func stageLostDequeue(ctx context.Context, t *testing.T, rdb redis.UniversalClient, queue, id string) {
	t.Helper()
	prefix := "asynq:{" + queue + "}:"
	_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.LRem(ctx, prefix+"active", 0, id)
		p.ZRem(ctx, prefix+"lease", id)
		p.LPush(ctx, prefix+"pending", id)
		p.HSet(ctx, prefix+"t:"+id, "state", "pending")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func queueLen(ctx context.Context, rdb redis.UniversalClient, queue, list string) int64 {
	key := "asynq:{" + queue + "}:" + list
	if list == "pending" || list == "active" {
		return rdb.LLen(ctx, key).Val()
	}
	return rdb.ZCard(ctx, key).Val()
}
