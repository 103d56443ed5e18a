package runtime_test

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/belfry/belfry/internal/redistest"
	"github.com/belfry/belfry/internal/testlog"
	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
	"github.com/belfry/belfry/runtime/core"
	"github.com/belfry/belfry/runtime/internal/clock"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// The shared helpers live in internal/redistest, for the internal
// packages' tests too; these names keep the runtime's tests short.
func sharedRedisAddr() string                           { return redistest.SharedAddr() }
func sharedRedis(t testing.TB) redis.UniversalClient    { return redistest.Shared(t) }
func startPrivateRedis(t testing.TB) *redistest.Private { return redistest.StartPrivate(t) }
func waitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	redistest.WaitFor(t, within, what, cond)
}
func uniq(prefix string) string { return redistest.Uniq(prefix) }

// stepTo moves clk to at and waits until the leader loop whose signals
// these are has stepped at that time or later: the work due by then is
// enqueued. The loop arms its timer for a moment on its clock, so the
// move may come while it sleeps or while it is busy. The sleeps signalled
// before the move are drained, being past: a test that waits for a sleep
// waits for one after it.
func stepTo(t testing.TB, clk *clock.Stub, signals runtime.LoopSignals, at time.Time) {
	t.Helper()
	signals.Waiting.Drain()
	clk.Set(at)
	signals.Stepped.WaitFor("a step at "+at.UTC().Format(time.TimeOnly), func(now time.Time) bool { return !now.Before(at) })
}

// stubLeader is one replica on a stub clock, with its leader loop's
// signals and the executions of its schedule.
type stubLeader struct {
	rt      *runtime.Runtime
	signals runtime.LoopSignals
	exec    *executions
}

// leadOnStub runs one replica of s on clk, on the shared Redis in a
// namespace and queue of its own with a worker, and returns once its
// leader state is built. Without a handler of its own, s's runs are
// recorded in the executions. before, if not nil, prepares Redis first.
func leadOnStub(t *testing.T, clk *clock.Stub, opts runtime.Options, s registry.Schedule, before func(rdb redis.UniversalClient, ns string)) stubLeader {
	t.Helper()
	rdb := sharedRedis(t)
	opts.Redis, opts.Namespace, opts.Logger = rdb, uniq("ns"), testLogger(t)
	l := stubLeader{exec: newExecutions()}
	s.Queue = uniq("q")
	if s.Handler == nil {
		s.Handler = l.exec.handler
	}
	rt, err := runtime.NewWithClock(registry.MustNew(s), opts, clk)
	if err != nil {
		t.Fatal(err)
	}
	// The signals these helpers receive: Rebuilt here, Stepped in stepTo,
	// which drains Waiting for the tests that wait for a sleep.
	l.rt, l.signals = rt, rt.LoopSignals()
	l.signals.Rebuilt.Init(t)
	l.signals.Stepped.Init(t)
	l.signals.Waiting.Init(t)
	if before != nil {
		before(rdb, opts.Namespace)
	}
	startWorker(t, rdb, s.Queue, func(mux *asynq.ServeMux) { rt.RegisterHandlers(mux) })
	runUntilTheEnd(t, rt)
	l.signals.Rebuilt.WaitOrTimeout()
	return l
}

// executions records every handler run by slot, independent of the ledger.
type executions struct {
	mu     sync.Mutex
	bySlot map[string]map[int64]int // schedule -> slot unix -> runs
	manual int
}

func newExecutions() *executions { return &executions{bySlot: map[string]map[int64]int{}} }

func (e *executions) handler(ctx context.Context, occ registry.Occurrence) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if occ.Manual {
		e.manual++
		return nil
	}
	m := e.bySlot[occ.Schedule]
	if m == nil {
		m = map[int64]int{}
		e.bySlot[occ.Schedule] = m
	}
	m[occ.Slot.Unix()]++
	return nil
}

func (e *executions) slots(name string) map[int64]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[int64]int{}
	for k, v := range e.bySlot[name] {
		out[k] = v
	}
	return out
}

// startWorker runs an asynq server for queue until the test ends.
func startWorker(t testing.TB, rdb redis.UniversalClient, queue string, register func(*asynq.ServeMux)) {
	t.Helper()
	// Retries at once, so tests of retried handlers take milliseconds.
	startWorkerWith(t, rdb, queue, register, workerConfig{Concurrency: 4, RetryDelay: time.Millisecond, ShutdownTimeout: 5 * time.Second})
}

// workerConfig is what tests vary in an asynq server.
type workerConfig struct {
	Concurrency                 int
	RetryDelay, ShutdownTimeout time.Duration
}

// startWorkerWith is startWorker with c; it returns the server, which
// the test may shut down before it ends.
func startWorkerWith(t testing.TB, rdb redis.UniversalClient, queue string, register func(*asynq.ServeMux), c workerConfig) *asynq.Server {
	t.Helper()
	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{
		Queues: map[string]int{queue: 1}, Concurrency: c.Concurrency, TaskCheckInterval: 20 * time.Millisecond,
		ShutdownTimeout: c.ShutdownTimeout, Logger: quietAsynq{}, LogLevel: asynq.FatalLevel,
		RetryDelayFunc:           func(int, error, *asynq.Task) time.Duration { return c.RetryDelay },
		DelayedTaskCheckInterval: 50 * time.Millisecond,
	})
	mux := asynq.NewServeMux()
	register(mux)
	if err := srv.Start(mux); err != nil {
		t.Fatalf("starting asynq server: %v", err)
	}
	t.Cleanup(srv.Shutdown)
	return srv
}

type quietAsynq struct{}

func (quietAsynq) Debug(...any) {}
func (quietAsynq) Info(...any)  {}
func (quietAsynq) Warn(...any)  {}
func (quietAsynq) Error(...any) {}
func (quietAsynq) Fatal(args ...any) {
	panic(fmt.Sprint(args...))
}

func testLogger(t testing.TB) *slog.Logger {
	return testlog.New(t, slog.LevelInfo)
}

// runUntilTheEnd runs rt until the test ends, then stops and closes it.
func runUntilTheEnd(t testing.TB, rt *runtime.Runtime) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { rt.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done; rt.Close() })
}

// copyCoreOptions copies into *dst, a core.Options or runtime.Options,
// every field of core.Options but Engine from src, the other of the two:
// the settings they share.
func copyCoreOptions(dst, src any) {
	to, from := reflect.ValueOf(dst).Elem(), reflect.ValueOf(src)
	shared := reflect.TypeFor[core.Options]()
	for i := range shared.NumField() {
		if name := shared.Field(i).Name; name != "Engine" {
			to.FieldByName(name).Set(from.FieldByName(name))
		}
	}
}
