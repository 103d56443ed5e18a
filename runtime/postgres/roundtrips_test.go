package postgres_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/belfry/belfry/runtime/engine"
	"github.com/belfry/belfry/runtime/postgres"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// roundTrips counts a pool's queries and batches, each a round trip,
// but River's own queries (sqlc's, named in a leading comment).
type roundTrips struct{ n atomic.Int64 }

func (c *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, q pgx.TraceQueryStartData) context.Context {
	if !strings.HasPrefix(q.SQL, "-- name:") {
		c.n.Add(1)
	}
	return ctx
}
func (c *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (c *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (c *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// traced is a pool on db's database whose round trips the returned
// counter counts.
func traced(t *testing.T, db *pgxpool.Pool) (*pgxpool.Pool, *roundTrips) {
	t.Helper()
	cfg := db.Config()
	trips := &roundTrips{}
	cfg.ConnConfig.Tracer = trips
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, trips
}

// The leader reads the due schedules' pauses and past pause windows
// between a slot coming due and its enqueue: in one round trip, each
// being lag. What it reads is the pauses and windows set.
func TestPauseStatesIsOneRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, trips := traced(t, migratedDB(t))
	e := configured(t, postgres.Config{Pool: db}, engine.Config{Namespace: "ns", Replica: "a", LeaseTTL: 2 * time.Second})
	at := time.Now().UnixMilli()
	if err := e.SetPause(ctx, "paused", engine.Pause{Reason: "maintenance", Actor: "ops", At: at}); err != nil {
		t.Fatal(err)
	}
	trips.n.Store(0)
	pauses, windows, err := e.PauseStates(ctx, []string{"running", "paused"})
	if err != nil {
		t.Fatal(err)
	}
	if n := trips.n.Load(); n != 1 {
		t.Errorf("PauseStates made %d round trips; want 1", n)
	}
	if len(pauses) != 2 || pauses[0] != nil || pauses[1] == nil || pauses[1].Reason != "maintenance" || pauses[1].At != at ||
		len(windows) != 2 || windows[0] != nil || windows[1] != nil {
		t.Errorf("PauseStates = %+v, %v; want the second paused, no windows", pauses, windows)
	}
}

// An enqueue is one transaction of four round trips of belfry's own,
// whatever River's insert takes: its begin with its timeouts, its checks
// (the term, the members, the slots already taken), its rows with their
// cursors, and its commit. A slot already taken costs no more.
func TestAnEnqueueIsFourRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := migratedDB(t)
	holdLease(t, pool)
	db, trips := traced(t, pool)
	e := configured(t, postgres.Config{Pool: db}, engine.Config{Namespace: "ns", Replica: "old", LeaseTTL: 30 * time.Second})
	items := slotItems("tick", time.Now().Truncate(time.Second))
	for _, want := range []bool{true, false} {
		trips.n.Store(0)
		if r := e.EnqueueAll(ctx, &engine.Fence{Term: "1"}, items)[0]; r.Err != nil || r.Inserted != want {
			t.Fatalf("enqueue: %+v; want inserted %v", r, want)
		}
		if n := trips.n.Load(); n != 4 {
			t.Errorf("an enqueue (inserted %v) made %d round trips of belfry's; want 4", want, n)
		}
	}
}
