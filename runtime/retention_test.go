package runtime_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
	"github.com/belfry/belfry/runtime/internal/store"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// failCommits fails every fenced commit (the script whose SHA it holds,
// the schedules' commit when empty) before it reaches Redis: each dispatch
// of its holder stops between the enqueue and the commit, as a crash there
// does.
// failCommits fails the commit script sha (the schedules' by default)
// while on holds true, or always when on is nil.
type failCommits struct {
	sha string
	on  *atomic.Bool
}

func (failCommits) DialHook(next redis.DialHook) redis.DialHook { return next }
func (failCommits) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (f failCommits) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	sha := f.sha
	if sha == "" {
		sha = store.CommitScriptHash()
	}
	return func(ctx context.Context, cmd redis.Cmder) error {
		if args := cmd.Args(); len(args) > 1 && args[0] == "evalsha" && args[1] == sha && (f.on == nil || f.on.Load()) {
			cmd.SetErr(errors.New("injected: the holder died before its commit"))
			return cmd.Err()
		}
		return next(ctx, cmd)
	}
}

// startJanitoredWorker is startWorker with asynq's janitor deleting
// finished tasks whose retention lapsed every 100ms instead of every 8s, so
// a freed task ID is free within the test's time.
func startJanitoredWorker(t *testing.T, rdb redis.UniversalClient, queue string, rt *runtime.Runtime) {
	t.Helper()
	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{
		Queues: map[string]int{queue: 1}, Concurrency: 4, TaskCheckInterval: 20 * time.Millisecond,
		ShutdownTimeout: 5 * time.Second, Logger: quietAsynq{}, LogLevel: asynq.FatalLevel,
		JanitorInterval: 100 * time.Millisecond,
	})
	mux := asynq.NewServeMux()
	rt.RegisterHandlers(mux)
	if err := srv.Start(mux); err != nil {
		t.Fatalf("starting asynq server: %v", err)
	}
	t.Cleanup(srv.Shutdown)
}

// A finished task's ID is reserved only for a lease TTL, so nothing but
// the cursor stops a slot from being enqueued again after that: a holder
// whose every commit fails after its enqueues (it crashed there, again and
// again) rebuilds its state from Redis and must not run its slots twice,
// nor may the replica that takes over from it within grace, long after
// their tasks' IDs were freed. Without the cursor raised in the enqueue's
// own transaction both re-enqueue every slot since the first.
func TestACrashBetweenEnqueueAndCommitRunsNoSlotTwice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	shared := sharedRedis(t)
	ns, queue := uniq("ns"), uniq("q")
	exec := newExecutions()
	reg := registry.MustNew(registry.Schedule{Name: "tick", Expr: "* * * * * *", Queue: queue, Handler: exec.handler})
	opts := runtime.Options{Namespace: ns, LeaseTTL: time.Second, Grace: time.Minute, Logger: testLogger(t)}

	crashing := redis.NewClient(&redis.Options{Addr: sharedRedisAddr()})
	t.Cleanup(func() { crashing.Close() })
	crashing.AddHook(failCommits{})
	optsA := opts
	optsA.Redis, optsA.Replica = crashing, "a"
	a, err := runtime.New(reg, optsA)
	if err != nil {
		t.Fatal(err)
	}
	startJanitoredWorker(t, shared, queue, a)
	runCtx, stopA := context.WithCancel(ctx)
	doneA := make(chan struct{})
	go func() { a.Run(runCtx); a.Close(); close(doneA) }()
	t.Cleanup(func() { stopA(); <-doneA })

	// The first slot's task ran and asynq deleted it: its ID is free.
	var first int64
	sched := reg.Schedules()[0]
	waitFor(t, 20*time.Second, "the first slot to run and its task to be deleted", func() bool {
		for slot := range exec.slots("tick") {
			if first == 0 || slot < first {
				first = slot
			}
		}
		if first == 0 {
			return false
		}
		_, err := asynq.NewInspectorFromRedisClient(shared).GetTaskInfo(queue, sched.Occurrence(ns, time.Unix(first, 0)).ID)
		return errors.Is(err, asynq.ErrTaskNotFound)
	})
	// The holder keeps failing its commits and rebuilding its state for a
	// few seconds more, long enough to enqueue the freed slots again.
	time.Sleep(3 * time.Second)
	stopA()
	<-doneA
	if a.Leadership().Leading() {
		t.Fatal("the stopped holder still leads")
	}
	handedOver := time.Now()

	optsB := opts
	optsB.Redis, optsB.Replica = shared, "b"
	b, err := runtime.New(reg, optsB)
	if err != nil {
		t.Fatal(err)
	}
	runUntilTheEnd(t, b)
	waitFor(t, 10*time.Second, "the new holder to run three slots", func() bool {
		n := 0
		for slot := range exec.slots("tick") {
			if time.Unix(slot, 0).After(handedOver) {
				n++
			}
		}
		return n >= 3
	})
	assertOncePerSlot(t, sched, exec.slots("tick"))
}

// A failing per-second schedule with retries: each retry lands after the
// leader trimmed its record from the history (limit 2, retries 2.5 s
// apart), and the worker's record of it must not stay in Redis with no
// index pointing to it. The ledger of the schedule stays at its limit.
func TestRetriesOfAFailingScheduleLeaveNoOrphanedRecords(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := sharedRedis(t)
	ns, queue := uniq("ns"), uniq("q")
	var attempts atomic.Int64
	reg := registry.MustNew(registry.Schedule{Name: "failing", Expr: "* * * * * *", Queue: queue, MaxRetry: 3,
		Handler: func(context.Context, registry.Occurrence) error { attempts.Add(1); return errors.New("always fails") }})
	rt, err := runtime.New(reg, runtime.Options{Redis: rdb, Namespace: ns, HistoryLimit: 2, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{
		Queues: map[string]int{queue: 1}, Concurrency: 8, TaskCheckInterval: 20 * time.Millisecond,
		ShutdownTimeout: 5 * time.Second, Logger: quietAsynq{}, LogLevel: asynq.FatalLevel,
		RetryDelayFunc:           func(int, error, *asynq.Task) time.Duration { return 2500 * time.Millisecond },
		DelayedTaskCheckInterval: 50 * time.Millisecond,
	})
	mux := asynq.NewServeMux()
	rt.RegisterHandlers(mux)
	if err := srv.Start(mux); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	runCtx, stop := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() { rt.Run(runCtx); close(stopped) }()
	t.Cleanup(func() { stop(); <-stopped; rt.Close() })
	keys := store.NewKeys(ns)
	// Slots' third retries (7.5 s after their first attempt) have run.
	waitFor(t, 30*time.Second, "retries long after the records were trimmed", func() bool {
		return attempts.Load() >= 24
	})
	// Counted at rest: the SCAN below takes many calls on the shared
	// Redis, and a leader still committing a record a second (and trimming
	// one) would be counted mid-change. An orphan a retry made stays.
	stop()
	<-stopped
	srv.Shutdown()
	records := 0
	iter := rdb.Scan(ctx, 0, keys.Prefix+"occ:*", 100).Iterator()
	for iter.Next(ctx) {
		records++
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	if indexed := rdb.ZCard(ctx, keys.History("failing")).Val(); records > int(indexed) || indexed > 2 {
		t.Errorf("%d records in Redis, %d in the history index; want at most the limit 2, every one indexed", records, indexed)
	}
}

// The same crash for a family member, whose cursor no enqueue raises: its
// finished task's ID must stay reserved while the slot is within grace, or
// the holder that keeps failing its commits enqueues the member's freed
// slots again.
func TestACrashBetweenAMemberEnqueueAndItsCommitRunsNoSlotTwice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	shared := sharedRedis(t)
	ns, queue := uniq("ns"), uniq("q")
	exec := newExecutions()
	reg := registry.MustNew(registry.Schedule{Name: "tick", Expr: "* * * * * *", Per: "tenant", Queue: queue, Handler: exec.handler})
	opts := runtime.Options{Namespace: ns, LeaseTTL: time.Second, Grace: time.Minute, Logger: testLogger(t)}

	crashing := redis.NewClient(&redis.Options{Addr: sharedRedisAddr()})
	t.Cleanup(func() { crashing.Close() })
	crashing.AddHook(failCommits{sha: store.FamilyCommitScriptHash()})
	optsA := opts
	optsA.Redis, optsA.Replica = crashing, "a"
	a, err := runtime.New(reg, optsA)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Families().Set(ctx, "tick", runtime.Member{Key: "acme", Zone: "UTC"}); err != nil {
		t.Fatal(err)
	}
	startJanitoredWorker(t, shared, queue, a)
	runCtx, stopA := context.WithCancel(ctx)
	doneA := make(chan struct{})
	go func() { a.Run(runCtx); a.Close(); close(doneA) }()
	t.Cleanup(func() { stopA(); <-doneA })

	// The holder enqueues, fails its commit and rebuilds its state from
	// Redis, again and again, for a few seconds: well past its tasks'
	// lease-long retention had the member's kept no more.
	waitFor(t, 20*time.Second, "the member's slots to run for 4s", func() bool { return len(exec.slots("tick")) >= 4 })
	stopA()
	<-doneA
	assertOncePerSlot(t, reg.Schedules()[0], exec.slots("tick"))
}

// With misfire=latest a member's slot older than grace is enqueued again
// while it is the member's newest: a holder whose member commit failed
// after the enqueue (it crashed, or Redis went away with the commit), and
// that comes back after grace, finds the member's cursor before the slot
// and nothing else due. The slot's finished task must still hold its ID
// then, or the slot runs again.
func TestAMemberSlotMisfireLatestRunsAgainAfterACrashRunsOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns, queue := uniq("ns"), uniq("q")
	exec := newExecutions()
	reg := registry.MustNew(registry.Schedule{Name: "tick", Expr: "*/5 * * * * *", Per: "tenant", Queue: queue,
		Misfire: registry.MisfireLatest, Handler: exec.handler})
	var failing atomic.Bool
	crashing := redis.NewClient(&redis.Options{Addr: sharedRedisAddr()})
	t.Cleanup(func() { crashing.Close() })
	crashing.AddHook(failCommits{sha: store.FamilyCommitScriptHash(), on: &failing})
	a, err := runtime.New(reg, runtime.Options{Redis: crashing, Replica: "a", Namespace: ns, LeaseTTL: time.Second,
		Grace: time.Second, SkewMargin: 500 * time.Millisecond, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Families().Set(ctx, "tick", runtime.Member{Key: "acme", Zone: "UTC"}); err != nil {
		t.Fatal(err)
	}
	startJanitoredWorker(t, sharedRedis(t), queue, a)
	runUntilTheEnd(t, a)
	// A first slot commits, so the bucket's cursor is behind the next.
	waitFor(t, 20*time.Second, "a first slot to run", func() bool { return len(exec.slots("tick")) >= 1 })
	failing.Store(true)
	// Every commit from now on fails, and the holder rebuilds its state
	// from Redis again and again, well past grace and the tasks' retention
	// had it been grace-long.
	waitFor(t, 20*time.Second, "two more slots to run", func() bool { return len(exec.slots("tick")) >= 3 })
	assertOncePerSlot(t, reg.Schedules()[0], exec.slots("tick"))
}
