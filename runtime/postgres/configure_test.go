package postgres_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/core"
	"github.com/belfry/belfry/runtime/engine"
	"github.com/belfry/belfry/runtime/internal/clock"
	"github.com/belfry/belfry/runtime/postgres"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
)

// core.New configures the engine with the runtime's settings: its rows
// are the runtime's namespace's, its lease is held under the runtime's
// replica name for the runtime's lease TTL, and its history keeps the
// runtime's HistoryLimit (a per-second schedule fewer, as core decides).
// Before that the engine answers every call with ErrUnconfigured, and a
// second runtime given the same engine is refused.
func TestTheRuntimeConfiguresTheEngine(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := migratedDB(t)
	eng := unconfigured(t, db)
	if _, err := eng.Holder(ctx); !errors.Is(err, postgres.ErrUnconfigured) {
		t.Errorf("Holder before core.New = %v, want ErrUnconfigured", err)
	}
	noop := func(context.Context, registry.Occurrence) error { return nil }
	reg := registry.MustNew(registry.Schedule{Name: "daily", Expr: "17 3 * * *", Handler: noop},
		registry.Schedule{Name: "fast", Expr: "* * * * * *", Handler: noop})
	rt, err := core.New(reg, core.Options{Engine: eng, Namespace: "configured", Replica: "r1", LeaseTTL: 3 * time.Second,
		HistoryLimit: 25, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := core.New(reg, core.Options{Engine: eng, Namespace: "other", Logger: quietLogger()}); err == nil ||
		!strings.Contains(err.Error(), "already serves another runtime") {
		t.Errorf("a second core.New with the same engine = %v, want it refused", err)
	}

	for range 27 {
		if _, err := rt.Trigger(ctx, "daily", ""); err != nil {
			t.Fatal(err)
		}
	}
	for range 22 {
		if _, err := rt.Trigger(ctx, "fast", ""); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range map[string]int{"daily": 25, "fast": 20} {
		if n := count(t, db, `SELECT count(*) FROM belfry_record WHERE namespace = 'configured' AND schedule = $1`, name); n != want {
			t.Errorf("%s keeps %d records, want %d", name, n, want)
		}
	}

	runRuntime(t, rt)
	waitUntil(t, 10*time.Second, "the runtime to lead", rt.Leadership().Leading)
	var holder string
	var left float64
	if err := db.QueryRow(ctx, `SELECT holder, extract(epoch FROM expires_at - clock_timestamp())::float8
		FROM belfry_leader WHERE namespace = 'configured'`).Scan(&holder, &left); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(holder, "r1|") || left > 3 || left <= 0 {
		t.Errorf("lease held by %q for %.3fs more; want r1's, within the runtime's 3s TTL", holder, left)
	}
	if h := rt.Health(ctx); h.Engine != "postgres" {
		t.Errorf("health names the engine %q, want postgres", h.Engine)
	}
}

// The runtime's MayLead keeps the replica from leading while it refuses,
// and a holder gives its lease up when it starts refusing.
func TestMayLeadKeepsTheReplicaFromLeading(t *testing.T) {
	t.Parallel()
	db := migratedDB(t)
	var refusal atomic.Pointer[error]
	var asked atomic.Int32
	refuse := errors.New("a test's refusal")
	refusal.Store(&refuse)
	e := configured(t, postgres.Config{Pool: db}, engine.Config{Namespace: "ns", Replica: "a", LeaseTTL: 2 * time.Second,
		MayLead: func(context.Context) error { asked.Add(1); return *refusal.Load() }})
	other := newEngine(t, db, "b")
	term, stopOther := lead(t, other)
	run(t, e)
	stopOther() // released: a would take it at once, but for MayLead
	after := asked.Load()
	waitUntil(t, 5*time.Second, "a to ask MayLead twice more", func() bool { return asked.Load() >= after+2 })
	if h, err := e.Holder(context.Background()); err != nil || h.Replica != "" {
		t.Fatalf("Holder = %+v, %v while a's MayLead refuses; want the lease free", h, err)
	}
	if _, ok := e.Current(); ok {
		t.Fatal("a leads while MayLead refuses")
	}
	var none error
	refusal.Store(&none)
	waitUntil(t, 5*time.Second, "a to lead once MayLead allows", leading(e))
	if now, _ := e.Current(); mustInt(t, now) <= mustInt(t, term) {
		t.Errorf("a leads under term %s, want one after b's %s", now, term)
	}
	refusal.Store(&refuse)
	waitUntil(t, 5*time.Second, "a to give the lease up", func() bool {
		h, err := e.Holder(context.Background())
		_, ok := e.Current()
		return err == nil && h.Replica == "" && !ok
	})
}

// The engine's trust in its lease is measured on the runtime's clock, as
// the Redis engine's is: a clock moved past the lease's life ends the
// trust before the next renewal.
func TestTheLeaseIsTrustedOnTheRuntimesClock(t *testing.T) {
	t.Parallel()
	db := migratedDB(t)
	clk := clock.NewStub(time.Now())
	// A long TTL: the next renewal, which would trust the lease again,
	// is a third of it away.
	e := configured(t, postgres.Config{Pool: db}, engine.Config{Namespace: "ns", Replica: "a", LeaseTTL: time.Minute, Clock: clk})
	lead(t, e)
	clk.Advance(time.Minute)
	if _, ok := e.Current(); ok {
		t.Error("the engine trusts its lease a TTL later by the runtime's clock")
	}
}

// A record is deleted once its last write is older than the runtime's
// record TTL, by the leader's prune, as a Redis record expires; a record
// written since stays.
func TestRecordsExpireAfterTheRecordTTL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := migratedDB(t)
	e := configured(t, postgres.Config{Pool: db}, engine.Config{Namespace: "ns", Replica: "a", LeaseTTL: 2 * time.Second, RecordTTL: time.Hour})
	now := time.Now()
	for _, id := range []string{"cron:ns/tick:old", "cron:ns/tick:new"} {
		rec := engine.Rec{ID: id, Slot: now.Unix(), At: now.UnixMilli(), Outcome: "enqueued", Score: now.UnixMilli()}
		if err := e.RecordManual(ctx, engine.Commit{Name: "tick", Recs: []engine.Rec{rec}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec(ctx, `UPDATE belfry_record SET updated_at = now() - interval '61 minutes' WHERE occurrence_id = 'cron:ns/tick:old'`); err != nil {
		t.Fatal(err)
	}
	if n, err := e.PruneRecords(ctx); err != nil || n != 1 {
		t.Fatalf("PruneRecords = %d, %v; want the expired record deleted", n, err)
	}
	if ids, err := e.History(ctx, "tick", 10); err != nil || len(ids) != 1 || ids[0] != "cron:ns/tick:new" {
		t.Errorf("History = %v, %v; want only the record written within the TTL", ids, err)
	}

	// The leader prunes on its own.
	if _, err := db.Exec(ctx, `UPDATE belfry_record SET updated_at = now() - interval '61 minutes'`); err != nil {
		t.Fatal(err)
	}
	lead(t, e)
	waitUntil(t, 10*time.Second, "the leader to delete the expired record", func() bool {
		return count(t, db, `SELECT count(*) FROM belfry_record WHERE namespace = 'ns'`) == 0
	})
}

// A runtime given no replica name leads under its default, hostname-pid,
// and so does its engine: the runtime names the engine's replica.
func TestTheEngineTakesTheRuntimesReplicaName(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := migratedDB(t)
	eng := unconfigured(t, db)
	rt, err := core.New(registry.MustNew(registry.Schedule{Name: "tick", Expr: "@every 1s",
		Handler: func(context.Context, registry.Occurrence) error { return nil }}),
		core.Options{Engine: eng, Namespace: "ns", LeaseTTL: 2 * time.Second, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	runRuntime(t, rt)
	host, _ := os.Hostname()
	want := host + "-" + strconv.Itoa(os.Getpid())
	if rt.Replica() != want {
		t.Fatalf("the runtime's replica is %q, want its default %q", rt.Replica(), want)
	}
	waitUntil(t, 10*time.Second, "the runtime to lead", rt.Leadership().Leading)
	var holder string
	if err := db.QueryRow(ctx, `SELECT holder FROM belfry_leader WHERE namespace = 'ns'`).Scan(&holder); err != nil ||
		!strings.HasPrefix(holder, want+"|") {
		t.Errorf("the lease's holder is %q (%v), want replica %s", holder, err, want)
	}
}

// unconfigured is the engine New builds on db, for core.New to configure.
func unconfigured(t *testing.T, db *pgxpool.Pool) *postgres.Engine {
	t.Helper()
	eng, err := postgres.New(postgres.Config{Pool: db})
	if err != nil {
		t.Fatal(err)
	}
	return eng
}

// One River client can insert belfry's jobs and work them, as a service
// that already runs River has it: the client is built on the workers
// bundle, given to the engine (its insert hooks see belfry's jobs), and
// belfry's workers join the bundle once the runtime exists, before Start.
func TestOneRiverClientInsertsAndWorks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := migratedDB(t)
	var inserted atomic.Int32
	workers := river.NewWorkers()
	client, err := river.NewClient(riverpgxv5.New(db), &river.Config{
		Queues: map[string]river.QueueConfig{registry.QueueDefault: {MaxWorkers: 2}}, Workers: workers, Logger: quietLogger(),
		Hooks: []rivertype.Hook{river.HookInsertBeginFunc(func(context.Context, *rivertype.JobInsertParams) error {
			inserted.Add(1)
			return nil
		})},
		FetchCooldown: 10 * time.Millisecond, FetchPollInterval: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := postgres.New(postgres.Config{Pool: db, River: client})
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan registry.Occurrence, 1)
	rt, err := core.New(registry.MustNew(registry.Schedule{Name: "daily", Expr: "17 3 * * *",
		Handler: func(_ context.Context, occ registry.Occurrence) error { ran <- occ; return nil }}),
		core.Options{Engine: eng, Namespace: "ns", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := postgres.AddWorkers(workers, rt); err != nil {
		t.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Stop(context.Background()) })
	occ, err := rt.Trigger(ctx, "daily", "")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-ran:
		if got.ID != occ.ID {
			t.Errorf("ran %s, want %s", got.ID, occ.ID)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the triggered occurrence did not run within 10s")
	}
	if inserted.Load() != 1 {
		t.Errorf("the client's insert hook saw %d jobs, want 1", inserted.Load())
	}
}
