package runtime_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/belfry/belfry/internal/redistest"
	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// With ReplicaAcks a worker marks each attempt's start in the task and has
// a replica acknowledge it before its handler runs (runtime/internal/redisengine/start.go).
// The subtests share a primary with one replica, each with a queue and a
// namespace of its own, so those with the replica up run at once; the
// last stops the replica.
func TestAnAttemptDeliveredTwiceRunsOnce(t *testing.T) {
	t.Parallel()
	s := redistest.StartSentinel(t, redistest.SentinelOptions{Sentinels: 1})
	rdb := func(t *testing.T) redis.UniversalClient { return s.Servers[0].Client(t) }
	t.Run("replica up", func(t *testing.T) {
		t.Run("first succeeds", func(t *testing.T) { t.Parallel(); deliverTwice(t, rdb(t), false) })
		t.Run("first fails", func(t *testing.T) { t.Parallel(); deliverTwice(t, rdb(t), true) })
		t.Run("first interrupted", func(t *testing.T) { t.Parallel(); interruptFirst(t, rdb(t)) })
		t.Run("Redis refuses the mark", func(t *testing.T) {
			t.Parallel()
			c := s.Servers[0].Client(t)
			c.AddHook(refuseStartMarks{})
			runRefused(t, c)
		})
	})
	t.Run("no replica answers", func(t *testing.T) {
		s.Servers[1].Kill()
		runWithoutReplica(t, rdb(t), s.Servers[1])
	})
}

// markRig is a runtime with ReplicaAcks, a schedule whose handler the
// subtest shapes, the attempt of each run, and the runtime's log.
type markRig struct {
	t        *testing.T
	ctx      context.Context
	rdb      redis.UniversalClient
	queue    string
	rt       *runtime.Runtime
	attempts attemptLog
	log      syncBuffer
}

// newMarkRig builds the rig; handle is the handler's body after its run
// is noted, told whether the run is the first.
func newMarkRig(t *testing.T, rdb redis.UniversalClient, leaseTTL time.Duration, handle func(ctx context.Context, first bool) error) *markRig {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	rig := &markRig{t: t, ctx: ctx, rdb: rdb, queue: uniq("q")}
	handler := func(ctx context.Context, occ registry.Occurrence) error { return handle(ctx, rig.attempts.note(ctx)) }
	reg := registry.MustNew(registry.Schedule{Name: "job", Expr: "0 0 1 1 *", Queue: rig.queue, MaxRetry: 1, Handler: handler})
	logger := slog.New(slog.NewTextHandler(&rig.log, &slog.HandlerOptions{Level: slog.LevelInfo}))
	rt, err := runtime.New(reg, runtime.Options{Redis: rdb, Namespace: uniq("ns"), ReplicaAcks: 1, LeaseTTL: leaseTTL, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { t.Logf("runtime log:\n%s", rig.log.String()) })
	rig.rt = rt
	return rig
}

// worker starts an asynq server for the rig's queue: n concurrent
// workers, retries after retryDelay.
func (rig *markRig) worker(n int, retryDelay, shutdownTimeout time.Duration) *asynq.Server {
	rig.t.Helper()
	return startWorkerWith(rig.t, rig.rdb, rig.queue, func(mux *asynq.ServeMux) { rig.rt.RegisterHandlers(mux) },
		workerConfig{Concurrency: n, RetryDelay: retryDelay, ShutdownTimeout: shutdownTimeout})
}

func (rig *markRig) taskKey(id string) string { return "asynq:{" + rig.queue + "}:t:" + id }

// waitCompleted waits until asynq has completed the task and nothing of
// the queue is left to run.
func (rig *markRig) waitCompleted(id string, within time.Duration) {
	rig.t.Helper()
	waitFor(rig.t, within, "the task to complete", func() bool {
		return rig.rdb.HGet(rig.ctx, rig.taskKey(id), "state").Val() == "completed"
	})
	for _, list := range []string{"pending", "active", "retry", "scheduled"} {
		if n := queueLen(rig.ctx, rig.rdb, rig.queue, list); n != 0 {
			rig.t.Errorf("%d tasks still %s", n, list)
		}
	}
}

// wantRuns checks the attempt of each run, in order.
func (rig *markRig) wantRuns(want []int, why string) {
	rig.t.Helper()
	if got := rig.attempts.get(); !slices.Equal(got, want) {
		rig.t.Errorf("runs by attempt %v; want %v: %s", got, want, why)
	}
}

// A failover can lose a worker's dequeue and keep the enqueue (a replica
// acknowledged it): the new primary hands the attempt, pending there, to
// another worker. The first worker's mark, not acknowledged on the old
// primary, is written again on the new one before it runs anything; the
// test leaves Redis as that leaves it — the task pending again with the
// first worker's mark, acknowledged, while the handler runs — and checks
// that the second delivery does not run the attempt and ends as the first
// did: done when it succeeded, retried once (attempt 1, once) when it
// failed. The first run outlasts its mark's TTL, held by its renewals.
func deliverTwice(t *testing.T, rdb redis.UniversalClient, firstFails bool) {
	entered, release := make(chan struct{}), make(chan struct{})
	rig := newMarkRig(t, rdb, 3*time.Second, func(ctx context.Context, first bool) error {
		if !first {
			return nil
		}
		close(entered)
		<-release
		if firstFails {
			return errors.New("the first attempt fails")
		}
		return nil
	})
	// The retry comes after the second delivery has seen the failure.
	retryDelay := 3 * time.Second
	// The first worker has one slot, busy with the first delivery, so the
	// second delivery goes to the second worker.
	rig.worker(1, retryDelay, 5*time.Second)
	occ := triggerAcked(rig.ctx, t, rig.rt, "job")
	select {
	case <-entered:
	case <-rig.ctx.Done():
		t.Fatal("the first delivery never ran")
	}
	stageLostDequeue(rig.ctx, t, rdb, rig.queue, occ.ID)
	rig.worker(4, retryDelay, 5*time.Second)
	active := "asynq:{" + rig.queue + "}:active"
	waitFor(t, 10*time.Second, "the second delivery to take the task", func() bool {
		ids, _ := rdb.LRange(rig.ctx, active, 0, -1).Result()
		return len(rig.attempts.get()) > 1 || slices.Contains(ids, occ.ID)
	})
	// Hold the first run past its mark's first expiry, by two of the
	// second delivery's longest waits between looks (a second): it must
	// keep waiting, as the first worker renews the mark.
	heldUntil := markExpiry(rig.ctx, t, rdb, rig.taskKey(occ.ID)) + 2000
	waitFor(t, 10*time.Second, "Redis's clock to pass the mark's first expiry", func() bool {
		now, err := rdb.Time(rig.ctx).Result()
		return err == nil && now.UnixMilli() > heldUntil
	})
	close(release)

	rig.waitCompleted(occ.ID, 20*time.Second)
	want, skipped := []int{0}, "failed=false"
	if firstFails {
		want, skipped = []int{0, 1}, "failed=true"
	}
	// The second delivery looks again within a second of the first's end.
	waitFor(t, 10*time.Second, "the second delivery to end as the first ("+skipped+")", func() bool {
		log := rig.log.String()
		return strings.Contains(log, "not running an attempt") && strings.Contains(log, skipped)
	})
	rig.wantRuns(want, "attempt 0 once, and its retry if it failed")
	hist, err := rig.rt.History(rig.ctx, "job", 10)
	if err != nil {
		t.Fatal(err)
	}
	last := want[len(want)-1]
	if len(hist) != 1 || hist[0].Outcome != runtime.OutcomeSucceeded || hist[0].Attempt != last {
		t.Errorf("ledger %+v; want one record, succeeded at attempt %d", hist, last)
	}
}

// interruptFirst shuts the first delivery's worker down mid-run: asynq
// puts the task back as it was, same attempt, and that attempt's next
// delivery runs it (the mark does not stand in its way) long before the
// interrupted one's mark would have expired, and is not failed or retried.
func interruptFirst(t *testing.T, rdb redis.UniversalClient) {
	entered := make(chan struct{})
	// A mark lasts a minute unless renewed: the next delivery may not
	// wait for it to expire.
	rig := newMarkRig(t, rdb, time.Minute, func(ctx context.Context, first bool) error {
		if first {
			close(entered)
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	})
	first := rig.worker(1, time.Millisecond, 100*time.Millisecond)
	occ := triggerAcked(rig.ctx, t, rig.rt, "job")
	select {
	case <-entered:
	case <-rig.ctx.Done():
		t.Fatal("the first delivery never ran")
	}
	first.Shutdown()
	// As a service stops: the workers, then the runtime, whose Close
	// waits for the interrupted attempt to give its mark up.
	rig.rt.Close()
	if mark := rdb.HGet(rig.ctx, rig.taskKey(occ.ID), "belfry_start").Val(); mark != "" {
		t.Errorf("after Close the interrupted attempt's mark is still there: %q", mark)
	}
	rig.worker(4, time.Millisecond, 5*time.Second)
	rig.waitCompleted(occ.ID, 20*time.Second)
	rig.wantRuns([]int{0, 0}, "the interrupted attempt, then the same attempt to the end")
}

// runWithoutReplica: while no replica answers, a worker cannot have its
// mark acknowledged, and does not run the handler: a failover could lose
// the task with its mark, and the scheduler would enqueue it again. It
// says so once the mark's TTL has passed, and runs the attempt, once, when
// the replica is back.
func runWithoutReplica(t *testing.T, rdb redis.UniversalClient, replica *redistest.Private) {
	rig := newMarkRig(t, rdb, 3*time.Second, func(context.Context, bool) error { return nil })
	rig.worker(4, time.Millisecond, 5*time.Second)
	// The manual run is enqueued, but not acknowledged either.
	occ, err := rig.rt.Trigger(rig.ctx, "job", "")
	if !errors.Is(err, runtime.ErrNotAcked) {
		t.Fatalf("trigger without a replica: %v; want ErrNotAcked", err)
	}
	waitFor(t, 20*time.Second, "the worker to say that the attempt waits for a replica", func() bool {
		return strings.Contains(rig.log.String(), "waits for a Redis replica to acknowledge its start mark")
	})
	rig.wantRuns(nil, "no attempt while no replica has its mark")
	replica.Start()
	rig.waitCompleted(occ.ID, 30*time.Second)
	rig.wantRuns([]int{0}, "the attempt, once, with the replica back")
}

// A Redis that refuses the start mark's script (an ACL without the rights
// it needs, say) does not hold the attempt until its timeout fails it: the
// worker runs the handler once the mark's TTL has passed, once, and says
// that it ran without a mark.
func runRefused(t *testing.T, rdb redis.UniversalClient) {
	rig := newMarkRig(t, rdb, 2*time.Second, func(context.Context, bool) error { return nil })
	rig.worker(4, time.Millisecond, 5*time.Second)
	occ := triggerAcked(rig.ctx, t, rig.rt, "job")
	// The task's timeout is the schedule's, 30 minutes: a worker that
	// waited for a mark would not complete it within the wait.
	rig.waitCompleted(occ.ID, 20*time.Second)
	rig.wantRuns([]int{0}, "the attempt, once")
	if !strings.Contains(rig.log.String(), "running an attempt without a start mark") {
		t.Error("no warning that the attempt ran without a start mark")
	}
	if mark := rdb.HGet(rig.ctx, rig.taskKey(occ.ID), "belfry_start").Val(); mark != "" {
		t.Errorf("the refused mark is in the task: %q", mark)
	}
}

// refuseStartMarks answers every script call on the start mark's field as
// a Redis whose ACL forbids it would; every other command goes to Redis.
type refuseStartMarks struct{}

var errNoPerm = errors.New("NOPERM this user has no permissions to run the 'evalsha' command")

func isStartMarkCall(cmd redis.Cmder) bool {
	if name := cmd.Name(); name != "evalsha" && name != "eval" {
		return false
	}
	return slices.Contains(cmd.Args(), any("belfry_start"))
}

func (refuseStartMarks) DialHook(next redis.DialHook) redis.DialHook { return next }

func (refuseStartMarks) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if isStartMarkCall(cmd) {
			cmd.SetErr(errNoPerm)
			return errNoPerm
		}
		return next(ctx, cmd)
	}
}

func (refuseStartMarks) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if slices.ContainsFunc(cmds, isStartMarkCall) {
			for _, cmd := range cmds {
				cmd.SetErr(errNoPerm)
			}
			return errNoPerm
		}
		return next(ctx, cmds)
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
	if len(f) != 5 || f[2] != "running" {
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
// lease set, back on the pending list, its state pending. The first
// worker's mark stays.
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
