package metrics_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/belfry/belfry/internal/redistest"
	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
	"github.com/belfry/belfry/runtime/metrics"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Without Redis the collector still exports every schedule's next run,
// says the scheduler is disabled, and has every series from start-up.
func TestHandlerServesTheRuntimesMetrics(t *testing.T) {
	reg := registry.MustNew(registry.Schedule{Name: "nightly", Expr: "17 3 * * *", Handler: func(ctx context.Context, occ registry.Occurrence) error { return nil }})
	rt, err := runtime.New(reg, runtime.Options{Replica: "r0"})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	metrics.Handler(rt).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{
		`belfry_schedule_next_run_timestamp_seconds{schedule="nightly"}`,
		`belfry_schedule_late{schedule="nightly"} 0`,
		`belfry_leader{replica="r0"} 0`,
		"belfry_redis_up 0",
		"belfry_scheduler_disabled 1",
		"belfry_redis_unsafe 0",
		`belfry_replica_name_duplicate{replica="r0"} 0`,
		`belfry_namespace_contended{replica="r0"} 0`,
		`belfry_namespace_legacy_in_use{replica="r0"} 0`,
		`belfry_schedule_last_success_timestamp_seconds{schedule="nightly"} 0`,
		`belfry_schedule_failing{schedule="nightly"} 0`,
		`belfry_schedule_paused{schedule="nightly"} 0`,
		`belfry_schedule_misrouted{schedule="nightly"} 0`,
		`belfry_schedule_occurrences_total{outcome="enqueued",schedule="nightly"} 0`,
		`belfry_schedule_attempts_total{outcome="failed",schedule="nightly"} 0`,
		`belfry_schedule_attempt_duration_seconds_count{schedule="nightly"} 0`,
		`belfry_schedule_fire_lag_seconds_count{schedule="nightly"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s:\n%s", want, body)
		}
	}
}

// Two replicas, each scraped: every enqueue and every attempt is counted by
// exactly one of them, so the sum across replicas is the cluster's total,
// which the ledger counts independently.
func TestCountersSumAcrossReplicasToTheClusterTotal(t *testing.T) {
	t.Parallel()
	rdb := redistest.Shared(t)
	ns, queue := redistest.Uniq("ns"), redistest.Uniq("q")
	var runs atomic.Int64
	reg := registry.MustNew(registry.Schedule{Name: "tick", Expr: "* * * * * *", Queue: queue,
		Handler: func(context.Context, registry.Occurrence) error { runs.Add(1); return nil }})
	var rts []*runtime.Runtime
	var handlers []http.Handler
	for _, name := range []string{"r0", "r1"} {
		rt, err := runtime.New(reg, runtime.Options{Redis: rdb, Namespace: ns, Replica: name, LeaseTTL: time.Second,
			Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		rts, handlers = append(rts, rt), append(handlers, metrics.Handler(rt))
	}
	// Each replica runs workers, as a service does.
	for _, rt := range rts {
		startWorkers(t, rdb, rt, queue)
	}
	var wg sync.WaitGroup
	cancels := make([]context.CancelFunc, len(rts))
	for i, rt := range rts {
		ctx, cancel := context.WithCancel(context.Background())
		cancels[i] = cancel
		wg.Go(func() { rt.Run(ctx) })
	}
	defer func() {
		for _, cancel := range cancels {
			cancel()
		}
		wg.Wait()
	}()
	redistest.WaitFor(t, 15*time.Second, "six runs", func() bool { return runs.Load() >= 6 })
	// The leader shuts down and hands over, so both replicas enqueue.
	leader := 0
	if rts[1].Leadership().Leading() {
		leader = 1
	}
	cancels[leader]()
	before := runs.Load()
	redistest.WaitFor(t, 15*time.Second, "runs under the other replica", func() bool { return runs.Load() >= before+3 })
	cancels[1-leader]()
	wg.Wait()
	redistest.WaitFor(t, 5*time.Second, "the last attempts to finish", func() bool {
		c, _ := rts[0].Monitor().Counters(context.Background())
		return c["tick"].Succeeded == c["tick"].Enqueued
	})
	counters, _ := rts[0].Monitor().Counters(context.Background())
	sum := func(series string) float64 {
		total := 0.0
		for _, h := range handlers {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
			total += value(rec.Body.String(), series)
		}
		return total
	}
	if got, want := sum(`belfry_schedule_occurrences_total{outcome="enqueued",schedule="tick"}`), float64(counters["tick"].Enqueued); got != want {
		t.Errorf("enqueues summed across replicas %v, want the ledger's %v", got, want)
	}
	if got, want := sum(`belfry_schedule_attempts_total{outcome="succeeded",schedule="tick"}`), float64(counters["tick"].Succeeded); got != want {
		t.Errorf("attempts summed across replicas %v, want the ledger's %v", got, want)
	}
	for _, rt := range rts {
		rt.Close()
	}
}

// Two registries configured with one namespace: both replicas say so in
// belfry_namespace_contended, beside the log line and health.
func TestNamespaceContentionIsAMetric(t *testing.T) {
	rdb := redistest.Shared(t)
	ns := redistest.Uniq("contended")
	var rts []*runtime.Runtime
	for _, name := range []string{"a", "b"} {
		reg := registry.MustNew(registry.Schedule{Name: "nightly", Expr: "17 3 * * *", Package: "example.com/" + name + "/jobs",
			Handler: func(context.Context, registry.Occurrence) error { return nil }})
		rt, err := runtime.New(reg, runtime.Options{Redis: rdb, Namespace: ns, Replica: name, LeaseTTL: time.Second,
			Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { rt.Run(ctx); close(done) }()
		t.Cleanup(func() { cancel(); <-done; rt.Close() })
		rts = append(rts, rt)
	}
	for _, rt := range rts {
		want := `belfry_namespace_contended{replica="` + rt.Replica() + `"} 1`
		redistest.WaitFor(t, 10*time.Second, want, func() bool {
			rec := httptest.NewRecorder()
			metrics.Handler(rt).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
			return strings.Contains(rec.Body.String(), want)
		})
	}
}

// Past the per-schedule limit a scrape counts every schedule together under
// schedule="*", names each late, failing and paused schedule all the same,
// and keeps every metric name of the unbounded scrape.
func TestPastTheLimitSeriesAreBoundedAndProblemsStillNamed(t *testing.T) {
	t.Parallel()
	rdb := redistest.Shared(t)
	ns, queue, unserved := redistest.Uniq("ns"), redistest.Uniq("q"), redistest.Uniq("unserved")
	nop := func(context.Context, registry.Occurrence) error { return nil }
	reg := registry.MustNew(
		registry.Schedule{Name: "ok-a", Expr: "17 3 * * *", Queue: queue, Handler: nop},
		registry.Schedule{Name: "ok-b", Expr: "17 3 * * *", Queue: queue, Handler: nop},
		registry.Schedule{Name: "held", Expr: "17 3 * * *", Queue: queue, Handler: nop},
		registry.Schedule{Name: "broken", Expr: "* * * * * *", Queue: queue, Timeout: time.Second,
			Handler: func(context.Context, registry.Occurrence) error { return errors.New("boom") }},
		// No worker serves its queue: its slots never succeed.
		registry.Schedule{Name: "stuck", Expr: "* * * * * *", Queue: unserved, Timeout: time.Second, Grace: time.Second, Handler: nop},
	)
	rt, err := runtime.New(reg, runtime.Options{Redis: rdb, Namespace: ns, Replica: "r0", LeaseTTL: time.Second,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	bounded := metrics.HandlerWith(rt, metrics.Options{PerScheduleLimit: 2})
	unbounded := metrics.HandlerWith(rt, metrics.Options{PerScheduleLimit: -1})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { rt.Run(ctx); close(done) }()
	defer func() { cancel(); <-done; rt.Close() }()
	startWorkers(t, rdb, rt, queue)
	if err := rt.Pause(ctx, "held", "migrating"); err != nil {
		t.Fatal(err)
	}
	scrape := func(h http.Handler) string {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		return rec.Body.String()
	}
	problems := []string{`belfry_schedule_late{schedule="stuck"} 1`, `belfry_schedule_failing{schedule="broken"} 1`,
		`belfry_schedule_paused{schedule="held"} 1`}
	var body string
	redistest.WaitFor(t, 20*time.Second, "a late, a failing and a paused schedule", func() bool {
		body = scrape(bounded)
		for _, want := range problems {
			if !strings.Contains(body, want) {
				return false
			}
		}
		return true
	})
	for _, want := range []string{
		`belfry_schedule_occurrences_total{outcome="enqueued",schedule="*"}`,
		`belfry_schedule_attempts_total{outcome="failed",schedule="*"}`,
		`belfry_schedule_attempt_duration_seconds_count{schedule="*"}`,
		`belfry_schedule_fire_lag_seconds_count{schedule="*"}`,
		`belfry_schedule_next_run_timestamp_seconds{schedule="*"}`,
		`belfry_schedule_last_enqueue_timestamp_seconds{schedule="*"}`,
		`belfry_schedule_last_success_timestamp_seconds{schedule="stuck"} 0`,
		`belfry_schedules{status="paused"} 1`,
		`belfry_schedule_late{schedule="*"} 0`,
		`belfry_schedule_misrouted{schedule="*"} 0`,
		`belfry_schedules{status="ok"} 2`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("bounded metrics lack %s:\n%s", want, body)
		}
	}
	for _, unwanted := range []string{`schedule="ok-a"`, `schedule="ok-b"`, `belfry_schedule_late{schedule="broken"} 0`,
		`belfry_schedule_failing{schedule="stuck"} 0`, `belfry_schedule_paused{schedule="broken"} 0`, `belfry_schedule_misrouted{schedule="held"} 0`} {
		if strings.Contains(body, unwanted) {
			t.Errorf("bounded metrics have %s:\n%s", unwanted, body)
		}
	}
	// The counters under "*" are every schedule's: the attempts of the one
	// schedule that ran are all there.
	if got := value(body, `belfry_schedule_attempts_total{outcome="failed",schedule="*"}`); got < 1 {
		t.Errorf("failed attempts under * = %v, want the failing schedule's (at least 1)", got)
	}
	// The next run under "*" is the soonest of all: an every-second one.
	if got := value(body, `belfry_schedule_next_run_timestamp_seconds{schedule="*"}`); got > float64(time.Now().Add(2*time.Second).Unix()) {
		t.Errorf("next run under * = %v, want within a second or two", got)
	}
	if got := value(body, `belfry_schedules{status="late"}`) + value(body, `belfry_schedules{status="failing"}`); got < 2 {
		t.Errorf("late plus failing schedules counted %v, want at least 2", got)
	}
	names := func(body string) []string {
		var out []string
		for line := range strings.Lines(body) {
			if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
				out = append(out, strings.Fields(rest)[0])
			}
		}
		return out
	}
	if b, u := names(body), names(scrape(unbounded)); !slices.Equal(b, u) {
		t.Errorf("bounded metric names %v, unbounded %v", b, u)
	}
}

// startWorkers serves queue with rt's handlers until the test ends, as a
// service's workers do.
func startWorkers(t *testing.T, rdb redis.UniversalClient, rt *runtime.Runtime, queue string) {
	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{Queues: map[string]int{queue: 1}, Concurrency: 2,
		TaskCheckInterval: 20 * time.Millisecond, LogLevel: asynq.FatalLevel})
	mux := asynq.NewServeMux()
	rt.RegisterHandlers(mux)
	if err := srv.Start(mux); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
}

// value is series' value in an exposition body, 0 when it has none.
func value(body, series string) float64 {
	for line := range strings.Lines(body) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), series+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}
