package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/belfry/belfry/runtime/engine"
	"github.com/belfry/belfry/runtime/postgres"
)

// withRetention gives items' tasks retention, as the core sizes it to a
// slot's window.
func withRetention(items []engine.Enqueue, retention time.Duration) []engine.Enqueue {
	for i := range items {
		items[i].Task.Retention = retention
	}
	return items
}

// A slot row stays as long as its task's retention, beyond the engine's
// SlotRetention: a family member with 36 h of grace whose leader died
// before its cursor commit is planned again by the next leader 25 h
// later, and finds its slot's row still there. Rows whose own window has
// passed go by SlotRetention, the newest of a schedule never.
func TestSlotRowsStayForTheirTasksRetention(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, e := leasedEngine(t)
	now := time.Now().Truncate(time.Second)
	const grace = 36 * time.Hour
	member := withRetention(slotItems("fam", now.Add(-25*time.Hour), now.Add(-24*time.Hour-time.Minute), now), grace)
	short := withRetention(slotItems("tick", now.Add(-25*time.Hour), now), time.Minute)
	for _, r := range e.EnqueueAll(ctx, nil, append(append([]engine.Enqueue{}, member...), short...)) {
		if r.Err != nil || !r.Inserted {
			t.Fatalf("enqueue: %+v", r)
		}
	}
	n, err := e.PruneSlots(ctx, 24*time.Hour)
	if err != nil || n != 1 {
		t.Errorf("PruneSlots(24h) deleted %d (%v); want only the short-lived schedule's old row", n, err)
	}
	for _, r := range e.EnqueueAll(ctx, nil, member) {
		if r.Err != nil || r.Inserted {
			t.Errorf("a slot within its task's retention enqueued again: %+v; want a conflict", r)
		}
	}
}

// A prune's backlog larger than one batch is deleted whole, batch by
// batch, and the record prune finds expired records through an index
// rather than by reading the namespace.
func TestAPruneBacklogIsDeletedWhole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := migratedDB(t)
	e := configured(t, postgres.Config{Pool: db}, engine.Config{Namespace: "ns", Replica: "a", RecordTTL: time.Hour})
	const backlog = 12_345 // more than two batches
	if _, err := db.Exec(ctx, `INSERT INTO belfry_record (namespace, occurrence_id, schedule, slot, outcome, score, updated_at)
		SELECT 'ns', 'r' || i, 'tick', now(), 'succeeded', i, now() - interval '2 hours' FROM generate_series(1, $1) AS i`, backlog); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, `INSERT INTO belfry_slot (namespace, schedule, slot, occurrence_id)
		SELECT 'ns', 'tick', now() - interval '3 days' + i * interval '1 second', 's' || i FROM generate_series(1, $1) AS i`, backlog); err != nil {
		t.Fatal(err)
	}
	if n, err := e.PruneRecords(ctx); err != nil || n != backlog {
		t.Errorf("PruneRecords = %d, %v; want the %d expired records", n, err, backlog)
	}
	if n, err := e.PruneSlots(ctx, time.Hour); err != nil || n != backlog-1 {
		t.Errorf("PruneSlots = %d, %v; want the %d old rows but the newest", n, err, backlog-1)
	}

	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	// With a sequential scan ruled out, the plan names the index only if
	// there is one that serves the prune.
	if _, err := tx.Exec(ctx, "SET LOCAL enable_seqscan = off"); err != nil {
		t.Fatal(err)
	}
	var plan strings.Builder
	rows, err := tx.Query(ctx, `EXPLAIN SELECT ctid FROM belfry_record WHERE namespace = 'ns' AND updated_at < clock_timestamp() - interval '1 hour' LIMIT 5000`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan.WriteString(line + "\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(plan.String(), "belfry_record_retention") {
		t.Errorf("the record prune's plan uses no retention index:\n%s", plan.String())
	}
}

// Progress not written for engine.ProgressRetention is deleted, with the
// unfinished work that named it; newer progress and its scope stay.
func TestPruneProgressDeletesExpiredProgress(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := migratedDB(t)
	e := newEngine(t, db, "a")
	now := time.Now().UnixMilli()
	for _, id := range []string{"old", "new"} {
		if _, err := e.ClaimProgress(ctx, id, "scope-"+id, id, now); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec(ctx, `UPDATE belfry_progress SET updated_at = now() - $1 * interval '1 millisecond' - interval '1 hour'
		WHERE occurrence_id = 'old'`, engine.ProgressRetention.Milliseconds()); err != nil {
		t.Fatal(err)
	}
	n, err := e.PruneProgress(ctx)
	if err != nil || n != 1 {
		t.Errorf("PruneProgress deleted %d (%v); want the one expired", n, err)
	}
	_, ok, err := e.Progresses(ctx, []string{"old", "new"})
	if err != nil || ok[0] || !ok[1] {
		t.Errorf("progress kept %v (%v); want only the new one's", ok, err)
	}
	for scope, want := range map[string]string{"scope-old": "", "scope-new": "new"} {
		if u, err := e.Unfinished(ctx, scope); err != nil || u != want {
			t.Errorf("unfinished work of %s = %q, %v; want %q", scope, u, err, want)
		}
	}
}
