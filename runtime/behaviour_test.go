package runtime_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
	"github.com/belfry/belfry/runtime/internal/clock"
	"github.com/belfry/belfry/runtime/internal/lease"
	"github.com/belfry/belfry/runtime/internal/store"
	"github.com/belfry/belfry/runtime/internal/testsignal"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

func TestTakeoverAfterHolderCrash(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const ttl = 2 * time.Second
	follower := newReplicas(t, 1, ttl, idleSchedule())[0]
	crashed := lease.New(lease.Config{Redis: follower.RedisClient(), Keys: store.NewKeys(follower.Namespace()),
		Replica: "crashed", TTL: ttl})
	acquired := time.Now()
	crashed.Acquire(ctx) // ...and never renews: it crashed
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { follower.Run(runCtx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	waitFor(t, 3*ttl, "the follower to take over", follower.Leadership().Leading)
	// The follower retries when the key expires, not on a blind poll: the
	// takeover lands within TTL of the crashed holder's last renewal, plus
	// scheduling slack, and never before.
	took := time.Since(acquired)
	if took < ttl-100*time.Millisecond || took > ttl+ttl/3 {
		t.Errorf("takeover %s after the holder's last renewal; want about the TTL %s", took, ttl)
	}
}

func TestGracefulShutdownHandsOverAtOnce(t *testing.T) {
	t.Parallel()
	rdb := sharedRedis(t)
	// A long TTL: without the release and its wake-up, handover would take
	// up to 20s.
	c := newCluster(t, rdb, 2, runtime.Options{LeaseTTL: 20 * time.Second}, registry.Schedule{Name: "nightly", Expr: "17 3 * * *"})
	waitFor(t, 5*time.Second, "a leader", func() bool { return c.leaders() == 1 })
	// A release wakes the follower through a subscription each replica
	// makes as it starts; a release published before the follower's is in
	// would wake nobody, and the test would wait for the TTL.
	released := store.NewKeys(c.ns).Released
	waitFor(t, 5*time.Second, "both replicas to listen for a release", func() bool {
		subs, err := rdb.PubSubNumSub(context.Background(), released).Result()
		return err == nil && subs[released] == 2
	})
	holder := 0
	if c.rts[1].Leadership().Leading() {
		holder = 1
	}
	stopped := time.Now()
	c.cancels[holder]()
	other := c.rts[1-holder]
	waitFor(t, 5*time.Second, "the other replica to take over", other.Leadership().Leading)
	if took := time.Since(stopped); took > 2*time.Second {
		t.Errorf("graceful handover took %s; want well under the 20s TTL", took)
	}
}

// The leader sleeps until the next due slot, not a poll's period: on a
// stub clock it says so (its waiting signal carries the slot), enqueues
// the slot when the clock reaches it, and then sleeps until the next
// day's, which a real-time test could not wait for.
func TestTheLeaderSleepsUntilTheNextDueSlot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	slot := time.Date(2026, 3, 2, 3, 17, 0, 0, time.UTC)
	clk := clock.NewStub(slot.Add(-2 * time.Second))
	// A margin wide enough for a clock a year off Redis's: the stub is
	// where the test puts it, not where the host is.
	l := leadOnStub(t, clk, runtime.Options{SkewMargin: 365 * 24 * time.Hour}, registry.Schedule{Name: "nightly", Expr: "17 3 * * *"}, nil)
	rt, signals, exec := l.rt, l.signals, l.exec
	signals.Waiting.WaitFor("a sleep until "+slot.Format(time.TimeOnly), func(until time.Time) bool { return until.Equal(slot) })
	stepTo(t, clk, signals, slot)
	waitFor(t, 10*time.Second, "the slot to run", func() bool { return exec.slots("nightly")[slot.Unix()] == 1 })
	next := slot.AddDate(0, 0, 1)
	signals.Waiting.WaitFor("a sleep until the next day's slot", func(until time.Time) bool { return until.Equal(next) })
	// A day's move outlasts the lease's trust window, which is measured on
	// the same clock: the holder renews at once, as one that wakes from a
	// stall does, rather than at its next renewal in real time.
	clk.Set(next)
	if err := rt.RenewLease(ctx); err != nil {
		t.Fatal(err)
	}
	stepTo(t, clk, signals, next)
	waitFor(t, 10*time.Second, "the next day's slot to run", func() bool { return exec.slots("nightly")[next.Unix()] == 1 })
	if c, err := rt.Monitor().Counters(ctx); err != nil || c["nightly"].Missed != 0 {
		t.Errorf("counters %+v, %v: want no slot missed", c["nightly"], err)
	}
}

// A stub-clock test steps through more slots than a test signal buffers:
// the signals the test does not wait for (the loop's sleeps, one or more
// per slot) do not pile up and fail it, and every slot runs once.
func TestStubClockStepsMoreSlotsThanTheSignalsBuffer(t *testing.T) {
	t.Parallel()
	start := time.Now().Truncate(time.Second)
	clk := clock.NewStub(start)
	// The stub runs ahead of Redis's clock, and of the lease's trust
	// window measured on it: margins wider than the steps taken.
	opts := runtime.Options{SkewMargin: 24 * time.Hour, LeaseTTL: time.Hour}
	l := leadOnStub(t, clk, opts, registry.Schedule{Name: "tick", Expr: "* * * * * *"}, nil)
	steps := testsignal.BufferSize + 20
	for i := 1; i <= steps; i++ {
		stepTo(t, clk, l.signals, start.Add(time.Duration(i)*time.Second))
	}
	waitFor(t, 30*time.Second, "every slot stepped to to run", func() bool {
		ran := l.exec.slots("tick")
		for i := 1; i <= steps; i++ {
			if ran[start.Add(time.Duration(i)*time.Second).Unix()] == 0 {
				return false
			}
		}
		return true
	})
	for slot, runs := range l.exec.slots("tick") {
		if runs != 1 {
			t.Errorf("slot %s ran %d times, want once", time.Unix(slot, 0).UTC(), runs)
		}
	}
}

// The scheduler was down for a minute: of its backlog, the slots older
// than grace are recorded missed and not run; the fresh ones run. On a
// stub clock, so the ages are exact.
func TestSlotsOlderThanGraceAreMissedNotRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const grace = 3 * time.Second
	start := time.Now().Truncate(time.Second)
	clk := clock.NewStub(start)
	l := leadOnStub(t, clk, runtime.Options{Grace: grace}, registry.Schedule{Name: "tick", Expr: "* * * * * *"}, func(rdb redis.UniversalClient, ns string) {
		// The cursor is 60 slots behind.
		if err := rdb.HSet(ctx, store.NewKeys(ns).Cursors, "tick", start.Add(-time.Minute).Unix()).Err(); err != nil {
			t.Fatal(err)
		}
	})
	rt, signals, exec := l.rt, l.signals, l.exec
	// The backlog is judged at start: the clock moves only once the loop
	// sleeps until the next slot.
	signals.Waiting.WaitFor("a sleep until the slot after start", func(until time.Time) bool { return until.Equal(start.Add(time.Second)) })
	for i := 1; i <= 3; i++ {
		stepTo(t, clk, signals, start.Add(time.Duration(i)*time.Second))
	}
	// The slots within grace of start, the one at start and the three
	// the clock moved to.
	fresh := 4 + int(grace/time.Second)
	waitFor(t, 10*time.Second, "the fresh slots to run", func() bool { return len(exec.slots("tick")) >= fresh })
	waitFor(t, 10*time.Second, "the backlog to be recorded as missed", func() bool {
		c, _ := rt.Monitor().Counters(ctx)
		return c["tick"].Missed+int64(fresh) == 60+3
	})
	for slot := range exec.slots("tick") {
		if age := start.Sub(time.Unix(slot, 0)); age > grace {
			t.Errorf("slot %s ran although it was %s old at start, beyond the %s grace", time.Unix(slot, 0).UTC(), age, grace)
		}
	}
	hist, err := rt.History(ctx, "tick", 100)
	if err != nil {
		t.Fatal(err)
	}
	outcomes := map[runtime.Outcome]int{}
	for _, r := range hist {
		outcomes[r.Outcome]++
	}
	if outcomes[runtime.OutcomeMissed] == 0 {
		t.Errorf("history has no missed record: %v", outcomes)
	}
}

func TestManualTriggerRunsOncePerRequest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := sharedRedis(t)
	c := newCluster(t, rdb, 1, runtime.Options{}, registry.Schedule{Name: "nightly", Expr: "17 3 * * *"})
	rt := c.rts[0]
	first, err := rt.Trigger(ctx, "nightly", "form-123")
	if err != nil {
		t.Fatal(err)
	}
	again, err := rt.Trigger(ctx, "nightly", "form-123") // the form submitted twice
	if err != nil {
		t.Fatal(err)
	}
	if first.ID != again.ID || !strings.Contains(first.ID, ":manual:") {
		t.Errorf("double submit gave IDs %q and %q, want one manual ID", first.ID, again.ID)
	}
	other, err := rt.Trigger(ctx, "nightly", "")
	if err != nil {
		t.Fatal(err)
	}
	if other.ID == first.ID {
		t.Error("a second request got the first request's ID")
	}
	waitFor(t, 10*time.Second, "two manual runs", func() bool {
		c.executed.mu.Lock()
		defer c.executed.mu.Unlock()
		return c.executed.manual >= 2
	})
	hist, err := rt.History(ctx, "nightly", 10)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "both manual runs to be recorded as succeeded", func() bool {
		hist, _ = rt.History(ctx, "nightly", 10)
		n := 0
		for _, r := range hist {
			if r.Manual && r.Outcome == runtime.OutcomeSucceeded {
				n++
			}
		}
		return n == 2
	})
	if len(hist) != 2 {
		t.Errorf("history has %d records, want 2: %+v", len(hist), hist)
	}
	if _, err := rt.Trigger(ctx, "no-such", ""); !errors.Is(err, runtime.ErrUnknownSchedule) {
		t.Errorf("trigger of an unknown schedule: %v, want ErrUnknownSchedule", err)
	}
	if _, err := rt.Trigger(ctx, "nightly", "bad key!"); err == nil {
		t.Error("a request key with spaces was accepted")
	}
	c.executed.mu.Lock()
	defer c.executed.mu.Unlock()
	if c.executed.manual != 2 {
		t.Errorf("%d manual runs, want 2", c.executed.manual)
	}
}

// A per-second schedule with overlap=skip whose run outlasts its slots:
// the slots due while it runs are skipped, and the first due after it
// ends runs. On a stub clock, one slot at a time.
func TestOverlapSkipDoesNotEnqueueWhilePreviousRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	var mu sync.Mutex
	runs := 0
	ran := func() int { mu.Lock(); defer mu.Unlock(); return runs }
	slow := func(ctx context.Context, occ registry.Occurrence) error {
		mu.Lock()
		runs++
		mu.Unlock()
		<-release
		return nil
	}
	start := time.Now().Truncate(time.Second)
	clk := clock.NewStub(start)
	l := leadOnStub(t, clk, runtime.Options{}, registry.Schedule{Name: "slow", Expr: "* * * * * *", Overlap: registry.OverlapSkip, Handler: slow}, nil)
	stepTo(t, clk, l.signals, start.Add(time.Second))
	waitFor(t, 10*time.Second, "the first run to start", func() bool { return ran() == 1 })
	stepTo(t, clk, l.signals, start.Add(2*time.Second))
	stepTo(t, clk, l.signals, start.Add(3*time.Second))
	waitFor(t, 10*time.Second, "two slots skipped while the first runs", func() bool {
		counters, _ := l.rt.Monitor().Counters(ctx)
		return counters["slow"].Skipped >= 2
	})
	if n := ran(); n != 1 {
		t.Errorf("%d runs started while the first was still running, want 1", n)
	}
	once.Do(func() { close(release) })
	// The leader sees the run end in asynq's task state: a slot or two
	// may still find it running and be skipped; the first enqueued runs.
	counted := func() (enqueued, skipped int64) {
		c, _ := l.rt.Monitor().Counters(ctx)
		return c["slow"].Enqueued, c["slow"].Skipped
	}
	for slot := start.Add(4 * time.Second); ; slot = slot.Add(time.Second) {
		if slot.After(start.Add(20 * time.Second)) {
			t.Fatal("every slot to 20 s after the first run ended was skipped")
		}
		enqueued, skipped := counted()
		stepTo(t, clk, l.signals, slot)
		waitFor(t, 10*time.Second, "the slot's outcome to be counted", func() bool {
			e, s := counted()
			return e+s > enqueued+skipped
		})
		if e, _ := counted(); e > enqueued {
			break
		}
	}
	waitFor(t, 10*time.Second, "a new occurrence after the first finished", func() bool { return ran() >= 2 })
}

func TestWithoutRedisTheSchedulerIsDisabledNotFatal(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	reg := registry.MustNew(idleSchedule())
	rt, err := runtime.New(reg, runtime.Options{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- rt.Run(ctx) }()
	waitFor(t, 5*time.Second, "the disabled notice", func() bool { return strings.Contains(logs.String(), "disabled") })
	if _, err := rt.Trigger(context.Background(), "nightly", ""); !errors.Is(err, runtime.ErrDisabled) {
		t.Errorf("Trigger without Redis: %v, want ErrDisabled", err)
	}
	if state, _ := rt.Redis().State(); state != runtime.RedisDisabled {
		t.Errorf("RedisState = %q, want disabled", state)
	}
	// A deploy that forgot its Redis must not look healthy; it is alive.
	rec := httptest.NewRecorder()
	rt.HealthHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), `"status":"disabled"`) {
		t.Errorf("health without Redis: %d %s, want 503 disabled", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	rt.LivezHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/livez", nil))
	if rec.Code != http.StatusOK {
		t.Errorf("livez without Redis: %d, want 200", rec.Code)
	}
	s, _ := rt.Registry().Lookup("nightly")
	if next := s.Next(time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)); next.Format(time.RFC3339) != "2026-11-29T03:17:00Z" {
		t.Errorf("next run %s, want 2026-11-29T03:17:00Z", next)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run returned %v", err)
	}
	if n := strings.Count(logs.String(), "\n"); n != 1 {
		t.Errorf("logged %d lines, want exactly one:\n%s", n, logs.String())
	}
}

func TestRedisDownThenBackResumesAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := startPrivateRedis(t)
	rdb := srv.Client(t)
	var logs syncBuffer
	queue := uniq("q")
	exec := newExecutions()
	reg := registry.MustNew(registry.Schedule{Name: "tick", Expr: "* * * * * *", Queue: queue, Handler: exec.handler})
	rt, err := runtime.New(reg, runtime.Options{Redis: rdb, LeaseTTL: time.Second,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	startWorker(t, rdb, queue, func(mux *asynq.ServeMux) { rt.RegisterHandlers(mux) })
	runUntilTheEnd(t, rt)

	waitFor(t, 10*time.Second, "runs before the outage", func() bool { return len(exec.slots("tick")) >= 2 })
	srv.Stop()
	waitFor(t, 10*time.Second, "the runtime to notice Redis is down", func() bool {
		state, _ := rt.Redis().State()
		return state == runtime.RedisDown && !rt.Leadership().Leading()
	})
	if h := rt.Health(ctx); h.Status != "unhealthy" || h.Redis != runtime.RedisDown {
		t.Errorf("health during the outage: %+v, want unhealthy with Redis down", h)
	}
	downSince := time.Now()
	waitFor(t, 10*time.Second, "several retries", func() bool { return time.Since(downSince) > 2*time.Second })
	srv.Start()
	restarted := time.Now()
	waitFor(t, 20*time.Second, "runs after Redis is back", func() bool {
		for slot := range exec.slots("tick") {
			if time.Unix(slot, 0).After(restarted) {
				return true
			}
		}
		return false
	})
	// Once, as "redis unreachable" or, had the first call to fail timed
	// out, "redis slow": the two are one outage.
	if n := strings.Count(logs.String(), "; retrying with backoff"); n != 1 {
		t.Errorf("logged the outage %d times, want once:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "redis reachable again") {
		t.Errorf("no recovery logged:\n%s", logs.String())
	}
	assertOncePerSlot(t, reg.Schedules()[0], onlyBefore(exec.slots("tick"), downSince))
}

// onlyBefore keeps the slots before t: slots during an outage are missed
// or late by design, so exactly-once is checked on each side separately.
func onlyBefore(runs map[int64]int, t time.Time) map[int64]int {
	out := map[int64]int{}
	for slot, n := range runs {
		if time.Unix(slot, 0).Before(t) {
			out[slot] = n
		}
	}
	return out
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A schedule removed from the code leaves its state in Redis: it is listed
// as an orphan, and Forget removes it (and refuses a declared schedule).
func TestRemovedSchedulesAreListedAndForgotten(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := sharedRedis(t)
	ns, queue := uniq("ns"), uniq("q")
	noop := func(context.Context, registry.Occurrence) error { return nil }
	before := registry.MustNew(registry.Schedule{Name: "old-report", Expr: "0 9 * * MON", Queue: queue, Handler: noop},
		registry.Schedule{Name: "nightly", Expr: "17 3 * * *", Queue: queue, Handler: noop})
	old, err := runtime.New(before, runtime.Options{Redis: rdb, Namespace: ns, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"old-report", "nightly"} {
		if _, err := old.Trigger(ctx, name, ""); err != nil {
			t.Fatal(err)
		}
	}
	// The next deploy no longer declares old-report.
	after := registry.MustNew(registry.Schedule{Name: "nightly", Expr: "17 3 * * *", Queue: queue, Handler: noop})
	rt, err := runtime.New(after, runtime.Options{Redis: rdb, Namespace: ns, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	orphans, err := rt.Orphans(ctx)
	if err != nil || len(orphans) != 1 || orphans[0] != "old-report" {
		t.Fatalf("orphans %v (%v), want [old-report]", orphans, err)
	}
	if err := rt.Forget(ctx, "nightly"); !errors.Is(err, runtime.ErrScheduleInUse) {
		t.Errorf("Forget of a declared schedule: %v, want ErrScheduleInUse", err)
	}
	if err := rt.Forget(ctx, "old-report"); err != nil {
		t.Fatal(err)
	}
	if orphans, _ := rt.Orphans(ctx); len(orphans) != 0 {
		t.Errorf("after Forget the orphans are %v, want none", orphans)
	}
	if h, _ := old.History(ctx, "old-report", 10); len(h) != 0 {
		t.Errorf("old-report's history survived Forget: %+v", h)
	}
	if h, _ := rt.History(ctx, "nightly", 10); len(h) != 1 {
		t.Errorf("nightly's history has %d records after forgetting another schedule, want 1", len(h))
	}
}

// After a three-day outage misfire=latest runs only the newest missed slot,
// with its own slot, and records the older ones as missed; misfire=all runs
// all three, oldest first.
func TestMisfireAfterAnOutage(t *testing.T) {
	for _, tt := range []struct {
		misfire      registry.Misfire
		ran          []int // days before the newest slot
		missed, runs int64
	}{
		{registry.MisfireLatest, []int{0}, 2, 1},
		{registry.MisfireAll, []int{2, 1, 0}, 0, 3},
	} {
		t.Run(string(tt.misfire), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			rdb := sharedRedis(t)
			ns, queue := uniq("ns"), uniq("q")
			exec := newExecutions()
			reg := registry.MustNew(registry.Schedule{Name: "daily", Expr: "0 0 * * *", Queue: queue, Misfire: tt.misfire,
				Grace: time.Minute, Handler: exec.handler})
			s := reg.Schedules()[0]
			// The replica's clock reads noon, so the newest slot (midnight) is
			// always older than grace, whenever the test runs.
			noon := time.Now().UTC().Truncate(24 * time.Hour).Add(12 * time.Hour)
			offset := clock.Offset(time.Until(noon))
			newest := s.Prev(noon)
			// The scheduler was down for three days: its cursor is before the
			// three newest slots.
			if err := rdb.HSet(ctx, store.NewKeys(ns).Cursors, "daily", newest.AddDate(0, 0, -3).Unix()).Err(); err != nil {
				t.Fatal(err)
			}
			// The replica's clock is hours off Redis's on purpose: a SkewMargin
			// that allows it, or the replica would rightly refuse to lead.
			rt, err := runtime.NewWithClock(reg, runtime.Options{Redis: rdb, Namespace: ns, LeaseTTL: 2 * time.Second,
				SkewMargin: 13 * time.Hour, Logger: testLogger(t)}, offset)
			if err != nil {
				t.Fatal(err)
			}
			startWorker(t, rdb, queue, func(mux *asynq.ServeMux) { rt.RegisterHandlers(mux) })
			runUntilTheEnd(t, rt)
			waitFor(t, 10*time.Second, "the missed slots to run", func() bool { return len(exec.slots("daily")) == len(tt.ran) })
			runs := exec.slots("daily")
			for _, days := range tt.ran {
				if slot := newest.AddDate(0, 0, -days); runs[slot.Unix()] != 1 {
					t.Errorf("slot %s ran %d times, want once; ran %v", slot.UTC(), runs[slot.Unix()], runs)
				}
			}
			counters, _ := rt.Monitor().Counters(ctx)
			if c := counters["daily"]; c.Missed != tt.missed || c.Enqueued != tt.runs {
				t.Errorf("missed %d, enqueued %d; want %d and %d", c.Missed, c.Enqueued, tt.missed, tt.runs)
			}
		})
	}
}
