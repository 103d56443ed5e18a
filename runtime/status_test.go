package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/belfry/belfry/internal/redistest"
	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
	"github.com/belfry/belfry/runtime/internal/clock"
	"github.com/belfry/belfry/runtime/internal/store"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// statusOf finds one schedule's status in a Statuses read.
func statusOf(st runtime.Statuses, name string) runtime.Status {
	for _, s := range st.Schedules {
		if s.Schedule.Name == name {
			return s.Status
		}
	}
	return ""
}

// Statuses reads no history, yet says what the ledger says: through real
// worker runs a failure makes a schedule failing until a success, a
// running attempt makes it running, a pause paused; and SnapshotOf, which
// reads the schedules in full, agrees with it on every one.
func TestStatusesFollowTheWorkersRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := sharedRedis(t)
	queue := uniq("q")
	var failNext atomic.Bool
	failNext.Store(true)
	release := make(chan struct{})
	reg := registry.MustNew(
		registry.Schedule{Name: "flips", Expr: "17 3 * * *", Queue: queue, MaxRetry: 0, Handler: func(context.Context, registry.Occurrence) error {
			if failNext.Load() {
				return errors.New("the database refused")
			}
			return nil
		}},
		registry.Schedule{Name: "blocks", Expr: "17 3 * * *", Queue: queue, Handler: func(ctx context.Context, _ registry.Occurrence) error {
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil
		}},
		registry.Schedule{Name: "held", Expr: "17 3 * * *", Queue: queue, Handler: func(context.Context, registry.Occurrence) error { return nil }},
	)
	rt, err := runtime.New(reg, runtime.Options{Redis: rdb, Namespace: uniq("ns"), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	startWorker(t, rdb, queue, func(mux *asynq.ServeMux) { rt.RegisterHandlers(mux) })
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	agree := func(want map[string]runtime.Status) func() bool {
		return func() bool {
			st, err := rt.Monitor().Statuses(ctx)
			if err != nil {
				return false
			}
			snap, err := rt.Monitor().SnapshotOf(ctx, []string{"flips", "blocks", "held"}, 1)
			if err != nil {
				return false
			}
			for _, s := range snap.Schedules {
				if got := statusOf(st, s.Schedule.Name); got != want[s.Schedule.Name] || s.Status != got {
					return false
				}
			}
			return true
		}
	}
	for _, name := range []string{"flips", "blocks"} {
		if _, err := rt.Trigger(ctx, name, "first"); err != nil {
			t.Fatal(err)
		}
	}
	if err := rt.Pause(ctx, "held", "migrating"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "flips failing, blocks running, held paused", agree(map[string]runtime.Status{
		"flips": runtime.StatusFailing, "blocks": runtime.StatusRunning, "held": runtime.StatusPaused}))
	h := rt.Health(ctx)
	if len(h.Failing) != 1 || h.Failing[0] != "flips" || len(h.Paused) != 1 || h.Status != "unhealthy" {
		t.Errorf("health %+v, want flips failing and held paused", h)
	}

	failNext.Store(false)
	if _, err := rt.Trigger(ctx, "flips", "second"); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := rt.Resume(ctx, "held"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "every schedule ok again", agree(map[string]runtime.Status{
		"flips": runtime.StatusOK, "blocks": runtime.StatusOK, "held": runtime.StatusOK}))
}

// countingClient is a client of the shared Redis that counts the commands
// it sends.
func countingClient(t *testing.T) (*redis.Client, *atomic.Int64) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: redistest.SharedAddr()})
	t.Cleanup(func() { rdb.Close() })
	return rdb, redistest.CountCommands(rdb)
}

// A schedule's late moment is kept between reads: Statuses reads its
// counters again only once that moment has passed, and then sees a success
// written meanwhile.
func TestStatusesRereadLatenessOnlyOnceItIsDue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, commands := countingClient(t)
	ns := uniq("ns")
	clk := clock.NewStub(time.Date(2026, 11, 29, 3, 20, 0, 0, time.UTC))
	reg := registry.MustNew(registry.Schedule{Name: "nightly", Expr: "17 3 * * *", Timeout: 10 * time.Minute,
		Grace: 5 * time.Minute, Handler: func(context.Context, registry.Occurrence) error { return nil }})
	rt, err := runtime.NewWithClock(reg, runtime.Options{Redis: rdb, Namespace: ns, Logger: testLogger(t)}, clk)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	ms := func(s string) int64 { tm, _ := time.Parse(time.RFC3339, s); return tm.UnixMilli() }
	// What the scheduler and a worker left: seen a month ago, last night's
	// slot done.
	if err := rdb.HSet(ctx, store.KeyPrefix(ns)+"counters", "nightly", store.FormatCounters(map[string]int64{
		"first_seen": ms("2026-11-01T00:00:00Z"), "last_slot_success": ms("2026-11-28T03:18:00Z")})).Err(); err != nil {
		t.Fatal(err)
	}
	read := func() (runtime.Status, int64) {
		t.Helper()
		before := commands.Load()
		st, err := rt.Monitor().Statuses(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return statusOf(st, "nightly"), commands.Load() - before
	}
	// A read of counters is two commands: an EXISTS of their old layout's
	// hash (see store.settleCounters) and the HMGET.
	if status, n := read(); status != runtime.StatusOK || n != 5 {
		t.Errorf("03:20, first read: %s in %d commands; want ok in 5 (three problem hashes, two of counters)", status, n)
	}
	if status, n := read(); status != runtime.StatusOK || n != 3 {
		t.Errorf("03:20, second read: %s in %d commands; want ok in 3: today's slot is not due until 03:32", status, n)
	}
	clk.Set(time.Date(2026, 11, 29, 3, 32, 0, 0, time.UTC))
	if status, _ := read(); status != runtime.StatusLate {
		t.Errorf("03:32 with no success since last night: %s, want late", status)
	}
	if err := rdb.HSet(ctx, store.KeyPrefix(ns)+"counters", "nightly", store.FormatCounters(map[string]int64{
		"first_seen": ms("2026-11-01T00:00:00Z"), "last_slot_success": ms("2026-11-29T03:33:00Z")})).Err(); err != nil {
		t.Fatal(err)
	}
	clk.Set(time.Date(2026, 11, 29, 3, 34, 0, 0, time.UTC))
	if status, n := read(); status != runtime.StatusOK || n != 5 {
		t.Errorf("after today's success: %s in %d commands; want ok in 5, its counters read again", status, n)
	}
}

// A schedule that failed before the workers kept the failing hash (an
// earlier version wrote only its history) is failing once a replica of
// this version runs, not ok until it fails again.
func TestStatusesMarkWhatFailedBeforeTheUpgrade(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := sharedRedis(t)
	ns := uniq("ns")
	keys := store.NewKeys(ns)
	noop := func(context.Context, registry.Occurrence) error { return nil }
	reg := registry.MustNew(registry.Schedule{Name: "broke", Expr: "17 3 * * *", Handler: noop},
		registry.Schedule{Name: "mended", Expr: "17 3 * * *", Handler: noop})
	night := time.Date(2026, 11, 29, 3, 17, 0, 0, time.UTC)
	for name, outcomes := range map[string][]string{"broke": {"succeeded", "failed"}, "mended": {"failed", "succeeded"}} {
		for i, o := range outcomes {
			slot := night.AddDate(0, 0, i)
			id := ns + "/" + name + ":" + slot.Format("20060102")
			if err := rdb.HSet(ctx, keys.Occurrence(id), "id", id, "schedule", name, "slot", slot.Unix(), "outcome", o,
				"finished_at", slot.Add(time.Second).UnixMilli()).Err(); err != nil {
				t.Fatal(err)
			}
			rdb.ZAdd(ctx, keys.History(name), redis.Z{Score: float64(slot.UnixMilli()), Member: id})
			rdb.HSet(ctx, keys.Stats, name+":last_"+map[string]string{"succeeded": "success", "failed": "failure"}[o], slot.Add(time.Second).UnixMilli())
		}
	}
	rt, err := runtime.New(reg, runtime.Options{Redis: rdb, Namespace: ns, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	runUntilTheEnd(t, rt)
	waitFor(t, 10*time.Second, "broke failing, mended ok", func() bool {
		st, err := rt.Monitor().Statuses(ctx)
		return err == nil && statusOf(st, "broke") == runtime.StatusFailing && statusOf(st, "mended") == runtime.StatusOK
	})
}

// A snapshot of more schedules than one read carries is read in parts
// side by side, and each schedule still gets its own state.
func TestSnapshotOfManySchedulesKeepsEachOnesState(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := sharedRedis(t)
	ns := uniq("ns")
	noop := func(context.Context, registry.Occurrence) error { return nil }
	const n = 10_007
	scheds := make([]registry.Schedule, n)
	names := make([]string, n)
	pipe := rdb.Pipeline()
	for i := range scheds {
		names[i] = fmt.Sprintf("job-%05d", i)
		scheds[i] = registry.Schedule{Name: names[i], Expr: "17 3 * * *", Handler: noop}
		pipe.HSet(ctx, store.KeyPrefix(ns)+"counters", names[i], store.FormatCounters(map[string]int64{"succeeded": int64(i)}))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	rt, err := runtime.New(registry.MustNew(scheds...), runtime.Options{Redis: rdb, Namespace: ns, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	snap, err := rt.Monitor().SnapshotOf(ctx, names, 1)
	if err != nil || len(snap.Schedules) != n {
		t.Fatalf("%d schedules, %v", len(snap.Schedules), err)
	}
	for i, st := range snap.Schedules {
		if st.Schedule.Name != names[i] || st.Counters.Succeeded != int64(i) {
			t.Fatalf("schedule %d: %s with %d succeeded, want %s with %d", i, st.Schedule.Name, st.Counters.Succeeded, names[i], i)
		}
	}
}

// Paused reads what is paused, not every schedule's field of the paused
// hash: one command for 1,000 schedules, and a pause left by a schedule no
// longer declared is not among them. Reading the pauses of 100,000 names
// by HMGET walked a 500-field listpack once a name.
func TestPausedReadsWhatIsPausedNotEverySchedule(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, commands := countingClient(t)
	ns := uniq("ns")
	noop := func(context.Context, registry.Occurrence) error { return nil }
	scheds := make([]registry.Schedule, 1000)
	for i := range scheds {
		scheds[i] = registry.Schedule{Name: fmt.Sprintf("job-%04d", i), Expr: "17 3 * * *", Handler: noop}
	}
	rt, err := runtime.New(registry.MustNew(scheds...), runtime.Options{Redis: rdb, Namespace: ns, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	for _, name := range []string{"job-0007", "job-0500", "job-0999"} {
		if err := rt.Pause(ctx, name, "migrating "+name); err != nil {
			t.Fatal(err)
		}
	}
	if err := rdb.HSet(ctx, store.NewKeys(ns).Paused, "removed-job", `{"reason":"gone","at":1}`).Err(); err != nil {
		t.Fatal(err)
	}
	before := commands.Load()
	paused, err := rt.Paused(ctx)
	if n := commands.Load() - before; err != nil || n != 1 {
		t.Errorf("Paused: %d commands, %v; want 1, an HSCAN of the paused hash", n, err)
	}
	if len(paused) != 3 || paused["job-0500"].Reason != "migrating job-0500" {
		t.Errorf("Paused: %v; want job-0007, job-0500 and job-0999 with their reasons", paused)
	}
}
