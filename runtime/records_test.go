package runtime_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
	"github.com/hibiken/asynq"
)

// Every execution ends in a true record, against real Redis and real asynq
// workers: a panic and a run past the timeout are failures with their
// cause, a retried failure shows as retrying and then as its final result,
// and every attempt is counted.
func TestEveryExecutionEndsInATrueRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := sharedRedis(t)
	queue := uniq("q")
	release := make(chan struct{})
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	returned := make(chan struct{})
	var flakyRuns atomic.Int32
	noop := func(context.Context, registry.Occurrence) error { return nil }
	reg := registry.MustNew(
		registry.Schedule{Name: "ok", Expr: "17 3 * * *", Queue: queue, Handler: noop},
		registry.Schedule{Name: "panics", Expr: "17 3 * * *", Queue: queue, MaxRetry: 0,
			Handler: func(context.Context, registry.Occurrence) error {
				var m map[string]int
				m["boom"]++ // assignment to entry in nil map
				return nil
			}},
		registry.Schedule{Name: "hangs", Expr: "17 3 * * *", Queue: queue, MaxRetry: 0, Timeout: time.Second,
			Handler: func(context.Context, registry.Occurrence) error {
				<-release // ignores its context
				close(returned)
				return nil
			}},
		registry.Schedule{Name: "flaky", Expr: "17 3 * * *", Queue: queue, MaxRetry: 2,
			Handler: func(context.Context, registry.Occurrence) error {
				if flakyRuns.Add(1) == 1 {
					return errors.New("connection reset by peer")
				}
				return nil
			}},
		registry.Schedule{Name: "gives-up", Expr: "17 3 * * *", Queue: queue, MaxRetry: 1,
			Handler: func(context.Context, registry.Occurrence) error { return errors.New("still broken") }},
	)
	rt, err := runtime.New(reg, runtime.Options{Redis: rdb, Namespace: uniq("ns"), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	startWorker(t, rdb, queue, func(mux *asynq.ServeMux) { rt.RegisterHandlers(mux) })
	for _, s := range reg.Schedules() {
		if _, err := rt.Trigger(ctx, s.Name, ""); err != nil {
			t.Fatal(err)
		}
	}
	last := func(name string) runtime.Record {
		h, _ := rt.History(ctx, name, 1)
		if len(h) == 0 {
			return runtime.Record{}
		}
		return h[0]
	}
	for name, want := range map[string]runtime.Outcome{
		"ok": runtime.OutcomeSucceeded, "panics": runtime.OutcomeFailed, "hangs": runtime.OutcomeFailed,
		"flaky": runtime.OutcomeSucceeded, "gives-up": runtime.OutcomeFailed,
	} {
		waitFor(t, 10*time.Second, name+" to end "+string(want), func() bool { return last(name).Outcome == want })
	}
	if rec := last("panics"); !strings.Contains(rec.Error, "panic: assignment to entry in nil map") || !strings.Contains(rec.Error, "records_test.go") {
		t.Errorf("the panic's record says %q; want the panic value and where it happened", rec.Error)
	}
	if rec := last("hangs"); !strings.HasPrefix(rec.Error, "timeout after 1s") || rec.FinishedAt.IsZero() {
		t.Errorf("the hung handler's record: %q finished %v; want a timeout with its end time", rec.Error, rec.FinishedAt)
	}
	if rec := last("flaky"); rec.Attempt != 1 || rec.Error != "" {
		t.Errorf("flaky's record: attempt %d, error %q; want the successful retry, attempt 1, no error", rec.Attempt, rec.Error)
	}
	if rec := last("gives-up"); rec.Attempt != 1 || rec.MaxRetry != 1 || rec.Error != "still broken" {
		t.Errorf("gives-up's record: attempt %d of %d, %q; want the last attempt 1 of 1", rec.Attempt, rec.MaxRetry, rec.Error)
	}
	// A handler that returns after its timeout must not turn the failure
	// into a success.
	releaseOnce.Do(func() { close(release) })
	<-returned
	if rec := last("hangs"); rec.Outcome != runtime.OutcomeFailed {
		t.Errorf("after the hung handler returned, its record says %s", rec.Outcome)
	}
	counters, err := rt.Counters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][2]int64{ // succeeded, failed attempts
		"ok": {1, 0}, "panics": {0, 1}, "hangs": {0, 1}, "flaky": {1, 1}, "gives-up": {0, 2},
	} {
		if c := counters[name]; c.Succeeded != want[0] || c.Failed != want[1] {
			t.Errorf("%s: succeeded %d, failed %d; want %d, %d", name, c.Succeeded, c.Failed, want[0], want[1])
		}
	}
	snap, _ := rt.Snapshot(ctx)
	for _, st := range snap.Schedules {
		want := runtime.StatusFailing
		if st.Schedule.Name == "ok" || st.Schedule.Name == "flaky" {
			want = runtime.StatusOK
		}
		if st.Status != want {
			t.Errorf("%s: status %s, want %s", st.Schedule.Name, st.Status, want)
		}
	}
}
