package postgres_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/core"
	"github.com/belfry/belfry/runtime/engine"
	"github.com/belfry/belfry/runtime/internal/clock"
	"github.com/belfry/belfry/runtime/internal/corehook"
	"github.com/belfry/belfry/runtime/postgres"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// An enqueue planned with pauses read ahead names their token; once a
// pause or a resume of any schedule of the namespace has committed since,
// by this release or by the one before it (which knows no version),
// it inserts nothing (no slot row, no River job, no cursor) and says so
// with ErrPausesChanged, its term still live. Planned with the pauses read
// again, it goes in.
func TestAnEnqueuePlannedWithPausesSinceChangedInsertsNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, e := leasedEngine(t)
	slot := time.Now().Truncate(time.Second)
	items := slotItems("tick", slot)
	tokenNow := func() string {
		t.Helper()
		_, _, token, err := e.PauseStatesAhead(ctx, []string{"tick"})
		if err != nil {
			t.Fatal(err)
		}
		return token
	}
	for _, change := range []struct {
		what string
		do   func() error
	}{
		{"a pause", func() error { return e.SetPause(ctx, "other", engine.Pause{Reason: "r", At: time.Now().UnixMilli()}) }},
		{"a resume", func() error { _, err := e.ClearPause(ctx, "other", time.Now().UnixMilli()); return err }},
		// As a replica of the release before the version writes it, during
		// a rolling deploy: the pause alone.
		{"a pause by the previous release", func() error {
			_, err := db.Exec(ctx, `INSERT INTO belfry_pause (namespace, schedule, reason) VALUES ('ns', 'third', 'r')`)
			return err
		}},
		{"a resume by the previous release", func() error {
			_, err := db.Exec(ctx, `DELETE FROM belfry_pause WHERE namespace = 'ns' AND schedule = 'third'`)
			return err
		}},
	} {
		token := tokenNow()
		if err := change.do(); err != nil {
			t.Fatal(err)
		}
		fence := &engine.Fence{Term: "1", Pauses: token}
		if r := e.EnqueueAll(ctx, fence, items)[0]; !errors.Is(r.Err, engine.ErrPausesChanged) || r.Inserted || fence.Rejected() {
			t.Fatalf("enqueue planned before %s: %+v, fence rejected %v; want ErrPausesChanged, nothing inserted, the term kept",
				change.what, r, fence.Rejected())
		}
		if n := count(t, db, `SELECT (SELECT count(*) FROM belfry_slot) + (SELECT count(*) FROM river_job) + (SELECT count(*) FROM belfry_cursor)`); n != 0 {
			t.Fatalf("enqueue planned before %s left %d slot rows, jobs and cursors; want none", change.what, n)
		}
	}
	if r := e.EnqueueAll(ctx, &engine.Fence{Term: "1", Pauses: tokenNow()}, items)[0]; r.Err != nil || !r.Inserted {
		t.Fatalf("enqueue planned with the pauses read again: %+v; want inserted", r)
	}
}

// statementLog records, in order, the statements of a pool's connections
// (a batch as its queries), for the tests that ask what ran between two
// moments.
type statementLog struct {
	mu    sync.Mutex
	stmts []loggedStatement
}

type loggedStatement struct {
	conn *pgx.Conn
	sql  string
}

func (l *statementLog) add(conn *pgx.Conn, sql string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stmts = append(l.stmts, loggedStatement{conn, sql})
}

func (l *statementLog) TraceQueryStart(ctx context.Context, conn *pgx.Conn, q pgx.TraceQueryStartData) context.Context {
	l.add(conn, q.SQL)
	return ctx
}
func (l *statementLog) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (l *statementLog) TraceBatchStart(ctx context.Context, conn *pgx.Conn, b pgx.TraceBatchStartData) context.Context {
	var sqls []string
	for _, q := range b.Batch.QueuedQueries {
		sqls = append(sqls, q.SQL)
	}
	l.add(conn, strings.Join(sqls, ";\n"))
	return ctx
}
func (l *statementLog) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (l *statementLog) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// mark is the number of statements logged so far.
func (l *statementLog) mark() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.stmts)
}

// since is the statements logged from mark on.
func (l *statementLog) since(mark int) []loggedStatement {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.stmts[mark:])
}

// aheadRuntime runs a runtime of one per-second schedule, "tick", on a
// fresh database whose statements it logs, on a stub clock set ahead of
// the real one (so that a resume the test makes is, by the database's
// clock, before the slot it lets run). It returns the runtime once the
// leader sleeps until the first slot, slot, having read that slot's
// pauses ahead, with the loop's signals on; before is called first, before
// the runtime starts.
func aheadRuntime(t *testing.T, before func(*postgres.Engine)) (rt *core.Runtime, signals corehook.LoopSignals, clk *clock.Stub, slot time.Time, db *pgxpool.Pool, log *statementLog) {
	t.Helper()
	direct := migratedDB(t)
	cfg := direct.Config()
	log = &statementLog{}
	cfg.ConnConfig.Tracer = log
	db, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	start := time.Now().Truncate(time.Second).Add(10*time.Second + 500*time.Millisecond)
	clk = clock.NewStub(start)
	slot = start.Truncate(time.Second).Add(time.Second)
	reg := registry.MustNew(registry.Schedule{Name: "tick", Expr: "* * * * * *",
		Handler: func(context.Context, registry.Occurrence) error { return nil }})
	eng, err := postgres.New(postgres.Config{Pool: db})
	if err != nil {
		t.Fatal(err)
	}
	// A long lease: no renewal falls between the slot and its enqueue.
	built, err := corehook.NewWithClock(reg, core.Options{Engine: eng, Namespace: "ns", Replica: "solo",
		LeaseTTL: time.Minute, Logger: quietLogger()}, clk)
	if err != nil {
		t.Fatal(err)
	}
	rt = built.(*core.Runtime)
	if before != nil {
		before(configured(t, postgres.Config{Pool: direct}, engine.Config{Namespace: "ns", Replica: "operator", LeaseTTL: time.Minute}))
	}
	signals = corehook.TestKnobsOf(rt).LoopSignals()
	signals.Waiting.Init(t)
	signals.Stepped.Init(t)
	runRuntime(t, rt)
	signals.Waiting.WaitFor("the leader to sleep until the first slot", func(until time.Time) bool { return until.Equal(slot) })
	return rt, signals, clk, slot, db, log
}

// slotRecord waits for the record of tick's slot and returns it.
func slotRecord(t *testing.T, rt *core.Runtime, slot time.Time) core.Record {
	t.Helper()
	var rec core.Record
	waitUntil(t, 10*time.Second, "the slot's record", func() bool {
		hist, err := rt.History(context.Background(), "tick", 10)
		if err != nil {
			return false
		}
		for _, r := range hist {
			if r.Slot.Equal(slot) {
				rec = r
				return true
			}
		}
		return false
	})
	return rec
}

// A pause committed after the leader read the slot's pauses ahead, and
// before the slot, holds: the slot is recorded paused and no job goes in.
func TestAPauseAfterThePausesWereReadAheadHolds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rt, _, clk, slot, db, _ := aheadRuntime(t, nil)
	if err := rt.Pause(ctx, "tick", "maintenance"); err != nil {
		t.Fatal(err)
	}
	clk.Set(slot)
	if rec := slotRecord(t, rt, slot); rec.Outcome != core.OutcomePaused {
		t.Errorf("the slot after the pause: %+v; want it paused", rec)
	}
	if n := count(t, db, `SELECT count(*) FROM river_job`); n != 0 {
		t.Errorf("%d jobs for the paused slot; want none", n)
	}
}

// A resume committed after the leader read the slot's pauses ahead (the
// schedule paused), and before the slot, lets the slot run.
func TestAResumeAfterThePausesWereReadAheadRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rt, _, clk, slot, db, _ := aheadRuntime(t, func(e *postgres.Engine) {
		if err := e.SetPause(ctx, "tick", engine.Pause{Reason: "maintenance", At: time.Now().UnixMilli()}); err != nil {
			t.Fatal(err)
		}
	})
	if err := rt.Resume(ctx, "tick"); err != nil {
		t.Fatal(err)
	}
	clk.Set(slot)
	if rec := slotRecord(t, rt, slot); rec.Outcome != core.OutcomeEnqueued {
		t.Errorf("the slot after the resume: %+v; want it enqueued", rec)
	}
	if n := count(t, db, `SELECT count(*) FROM river_job WHERE kind = 'tick'`); n != 1 {
		t.Errorf("%d jobs for the resumed slot; want 1", n)
	}
}

// Between the leader's wake-up at a slot and the BEGIN of the slot's
// enqueue no statement runs: the slot's pauses were read before it. The
// election's own statements (the lease, the replicas' heartbeats), on
// their own timer, are not the leader's path and are left out.
func TestNothingRunsBetweenTheSlotAndItsEnqueue(t *testing.T) {
	t.Parallel()
	_, signals, clk, slot, db, log := aheadRuntime(t, nil)
	mark := log.mark()
	clk.Set(slot)
	// The step at the slot is its dispatch, which returns once its
	// enqueue has; nothing of the test's runs meanwhile.
	signals.Stepped.WaitFor("the slot's dispatch", func(at time.Time) bool { return at.Equal(slot) })
	stmts := log.since(mark)
	if n := count(t, db, `SELECT count(*) FROM river_job WHERE kind = 'tick'`); n != 1 {
		t.Fatalf("%d jobs for the slot; want 1", n)
	}
	// The enqueue's transaction is the first whose batch inserts River's
	// job's slot row: its BEGIN is the statement before that batch's
	// first on the same connection, the term's check.
	fence := slices.IndexFunc(stmts, func(s loggedStatement) bool { return strings.Contains(s.sql, "belfry_slot s WHERE") })
	if fence < 0 {
		t.Fatalf("no enqueue among the statements after the slot: %v", stmts)
	}
	begin := fence - 1
	for begin >= 0 && stmts[begin].conn != stmts[fence].conn {
		begin--
	}
	if begin < 0 || !strings.HasPrefix(stmts[begin].sql, "BEGIN") {
		t.Fatalf("the enqueue's batch has no BEGIN before it on its connection: %v", stmts[:fence+1])
	}
	var between []string
	for _, s := range stmts[:begin] {
		if !strings.Contains(s.sql, "belfry_leader") && !strings.Contains(s.sql, "belfry_replica") {
			between = append(between, s.sql)
		}
	}
	if len(between) > 0 {
		t.Errorf("%d statements between the slot and its enqueue's BEGIN; want none:\n%s", len(between), strings.Join(between, "\n---\n"))
	}
}

// A database upgraded from the previous version, with a pause already
// held, starts its pause version at 0, and the next pause raises it.
func TestThePauseVersionStartsOnAnUpgradedDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := previousVersionDB(t)
	if _, err := db.Exec(ctx, `INSERT INTO belfry_pause (namespace, schedule, reason, actor) VALUES ('ns', 'tick', 'before', 'ops')`); err != nil {
		t.Fatal(err)
	}
	if _, err := postgres.Migrate(ctx, db, postgres.MigrateOptions{River: true}); err != nil {
		t.Fatal(err)
	}
	e := newEngine(t, db, "a")
	read := func() (*engine.Pause, string) {
		t.Helper()
		pauses, _, token, err := e.PauseStatesAhead(ctx, []string{"tick"})
		if err != nil {
			t.Fatal(err)
		}
		return pauses[0], token
	}
	if p, token := read(); p == nil || p.Reason != "before" || token != "0" {
		t.Errorf("after the upgrade: pause %+v, token %q; want the pause held before it, token 0", p, token)
	}
	if err := e.SetPause(ctx, "other", engine.Pause{Reason: "r", At: time.Now().UnixMilli()}); err != nil {
		t.Fatal(err)
	}
	if _, token := read(); token != "1" {
		t.Errorf("token after a pause %q; want 1", token)
	}
}

// A pause that waited for another pause's write of the namespace's pause
// version (one row every pause updates) goes in on a database whose
// sessions default to REPEATABLE READ: the engine's writes are READ
// COMMITTED, where such a wait ends in a serialization failure.
func TestAPauseWaitingOnAnotherGoesInWhateverTheDatabasesIsolation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := repeatableReadDB(t)
	e := newEngine(t, db, "old")
	if err := e.SetPause(ctx, "first", engine.Pause{Reason: "r", At: time.Now().UnixMilli()}); err != nil {
		t.Fatal(err)
	}
	// Another pause, between its write of the version and its commit.
	other := holding(t, db, `UPDATE belfry_pause_version SET version = version + 1 WHERE namespace = 'ns'`)
	paused := make(chan error, 1)
	go func() { paused <- e.SetPause(ctx, "second", engine.Pause{Reason: "r", At: time.Now().UnixMilli()}) }()
	waitUntil(t, 10*time.Second, "the pause to wait", waitingOnLock(t, db))
	if err := other.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-paused; err != nil {
		t.Errorf("a pause that waited for another: %v; want it in", err)
	}
}
