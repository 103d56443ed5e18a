package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/belfry/belfry/runtime/engine"
	"github.com/belfry/belfry/runtime/postgres"
	"github.com/jackc/pgx/v5/pgxpool"
)

// holdLease writes namespace "ns"'s lease as held by term 1 for a
// minute, so that a test drives the takeover itself.
func holdLease(t *testing.T, db *pgxpool.Pool) {
	t.Helper()
	if _, err := db.Exec(context.Background(), `INSERT INTO belfry_leader (namespace, holder, term, expires_at)
		VALUES ('ns', 'old', 1, clock_timestamp() + interval '1 minute')`); err != nil {
		t.Fatal(err)
	}
}

// leasedEngine is an engine of namespace "ns" on a fresh database whose
// lease term 1 holds (holdLease).
func leasedEngine(t *testing.T) (*pgxpool.Pool, *postgres.Engine) {
	t.Helper()
	db := migratedDB(t)
	e := newEngine(t, db, "old")
	holdLease(t, db)
	return db, e
}

// takeOver is the next leader's takeover of the lease: the update
// acquireSQL makes of the row once the lease has expired.
const takeOver = `UPDATE belfry_leader SET holder = 'new', term = term + 1, expires_at = clock_timestamp() + interval '1 minute' WHERE namespace = 'ns'`

// waitingOnLock reports whether a session of db's database other than
// the caller's waits on a lock.
func waitingOnLock(t *testing.T, db *pgxpool.Pool) func() bool {
	return func() bool {
		return count(t, db, `SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
			WHERE NOT l.granted AND a.datname = current_database() AND l.pid <> pg_backend_pid()`) > 0
	}
}

// oneConnection is an engine on a single connection of db's database,
// whose statements an enqueue of warmUp has prepared: a later enqueue's
// statements then wait at their execution, in order, not at their
// preparation, which comes before any of them runs.
func oneConnection(t *testing.T, db *pgxpool.Pool, fence *engine.Fence, warmUp []engine.Enqueue) *postgres.Engine {
	t.Helper()
	cfg := db.Config()
	cfg.MaxConns = 1
	one, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(one.Close)
	e := configured(t, postgres.Config{Pool: one}, engine.Config{Namespace: "ns", Replica: "old", LeaseTTL: 30 * time.Second})
	if r := e.EnqueueAll(context.Background(), fence, warmUp)[0]; r.Err != nil || !r.Inserted {
		t.Fatalf("warm-up enqueue: %+v", r)
	}
	return e
}

// holdSlotTable has a session hold the slot table, so that an enqueue
// stops at its insert, after the statements before it, until release.
func holdSlotTable(t *testing.T, db *pgxpool.Pool) (release func()) {
	t.Helper()
	ctx := context.Background()
	blocker, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { blocker.Rollback(ctx) })
	if _, err := blocker.Exec(ctx, `LOCK TABLE belfry_slot IN SHARE MODE`); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := blocker.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// endedOrWaiting reports whether done has its result, or a second session
// of db's database waits on a lock besides the enqueue a test stalled;
// done keeps its result.
func endedOrWaiting(t *testing.T, db *pgxpool.Pool, done chan error) func() bool {
	return func() bool {
		select {
		case err := <-done:
			done <- err
			return true
		default:
		}
		return count(t, db, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) > 1
	}
}

// The term's check and the enqueue's writes are one atomic step: a
// takeover that comes while a term-1 enqueue is between its statements
// either waits for the enqueue to commit, whole, or the enqueue is
// refused, whole. Never is the cursor raised past a slot that has no row
// (the next leader would start after it, and the slot would never run),
// and never does term 1 commit after term 2 began.
func TestATakeoverDuringAnEnqueueDoesNotSplitIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := migratedDB(t)
	holdLease(t, db)
	slot := time.Now().Truncate(time.Second)
	e := oneConnection(t, db, &engine.Fence{Term: "1"}, slotItems("tick", slot.Add(-time.Minute)))
	blocker := holdSlotTable(t, db)
	fence := &engine.Fence{Term: "1"}
	enqueued := make(chan engine.Result, 1)
	go func() { enqueued <- e.EnqueueAll(ctx, fence, slotItems("tick", slot))[0] }()
	waitUntil(t, 10*time.Second, "the enqueue to wait at its insert", waitingOnLock(t, db))

	// The next leader takes over meanwhile: it may have to wait for the
	// enqueue, so it runs aside.
	tookOver := make(chan error, 1)
	go func() { _, err := db.Exec(ctx, takeOver); tookOver <- err }()
	waitUntil(t, 10*time.Second, "the takeover to end or wait", endedOrWaiting(t, db, tookOver))
	blocker()
	r := <-enqueued
	if err := <-tookOver; err != nil {
		t.Fatal(err)
	}

	t.Logf("enqueue: %+v", r)
	rows := count(t, db, `SELECT count(*) FROM belfry_slot WHERE namespace = 'ns' AND slot = to_timestamp($1)`, slot.Unix())
	jobs := count(t, db, `SELECT count(*) FROM river_job`) - 1
	cursors := count(t, db, `SELECT count(*) FROM belfry_cursor WHERE namespace = 'ns' AND slot >= to_timestamp($1)`, slot.Unix())
	switch {
	case r.Err == nil && r.Inserted:
		if rows != 1 || jobs != 1 || cursors != 1 {
			t.Errorf("enqueue committed with %d slot rows, %d jobs, %d raised cursors; want 1 of each", rows, jobs, cursors)
		}
	case errors.Is(r.Err, engine.ErrNotLeader):
		if !fence.Rejected() || rows != 0 || jobs != 0 || cursors != 0 {
			t.Errorf("enqueue refused (fence rejected %v) with %d slot rows, %d jobs, %d raised cursors; want none", fence.Rejected(), rows, jobs, cursors)
		}
	default:
		t.Errorf("enqueue: %+v with %d slot rows, %d jobs, %d raised cursors; want it whole or refused whole", r, rows, jobs, cursors)
	}
}

// An enqueue whose term ended before it began is refused whole: no slot
// row, no job, no cursor moved.
func TestAnEnqueueAfterATakeoverIsRefusedWhole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, e := leasedEngine(t)
	if _, err := db.Exec(ctx, takeOver); err != nil {
		t.Fatal(err)
	}
	fence := &engine.Fence{Term: "1"}
	r := e.EnqueueAll(ctx, fence, slotItems("tick", time.Now().Truncate(time.Second)))[0]
	if !errors.Is(r.Err, engine.ErrNotLeader) || !fence.Rejected() {
		t.Fatalf("enqueue under an ended term: %+v, fence rejected %v; want ErrNotLeader, rejected", r, fence.Rejected())
	}
	if n := count(t, db, `SELECT count(*) FROM belfry_slot`) + count(t, db, `SELECT count(*) FROM belfry_cursor`); n != 0 {
		t.Errorf("%d slot rows and cursors written; want none", n)
	}
}

// A family step of an ended term cannot move a member's or bucket's
// cursor back, even were it let through: cursors only rise.
func TestAStaleFamilyStepDoesNotLowerCursors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, e := leasedEngine(t)
	if _, err := db.Exec(ctx, `INSERT INTO belfry_member (namespace, family, key) VALUES ('ns', 'fam', 'm1')`); err != nil {
		t.Fatal(err)
	}
	newer := engine.MemberCommit{Member: "m1", Cursor: "2000 0"}
	if err := e.CommitFamily(ctx, "1", "fam", engine.Commit{}, []engine.MemberCommit{newer}, "b", "2000"); err != nil {
		t.Fatal(err)
	}
	older := engine.MemberCommit{Member: "m1", Cursor: "1000 0"}
	if err := e.CommitFamily(ctx, "1", "fam", engine.Commit{}, []engine.MemberCommit{older}, "b", "1000"); err != nil {
		t.Fatal(err)
	}
	var cursor string
	var bucket int64
	if err := db.QueryRow(ctx, `SELECT cursor FROM belfry_member WHERE namespace = 'ns' AND family = 'fam' AND key = 'm1'`).Scan(&cursor); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(ctx, `SELECT slot FROM belfry_bucket_cursor WHERE namespace = 'ns' AND family = 'fam' AND bucket = 'b'`).Scan(&bucket); err != nil {
		t.Fatal(err)
	}
	if cursor != newer.Cursor || bucket != 2000 {
		t.Errorf("after a step at 2000 then one at 1000: member cursor %q, bucket cursor %d; want %q and 2000", cursor, bucket, newer.Cursor)
	}
}
