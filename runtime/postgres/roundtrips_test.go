package postgres_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/belfry/belfry/runtime/engine"
	"github.com/belfry/belfry/runtime/postgres"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// roundTrips counts a pool's queries and batches, each a round trip.
type roundTrips struct{ n atomic.Int64 }

func (c *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (c *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (c *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (c *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// The leader reads the due schedules' pauses and past pause windows
// between a slot coming due and its enqueue: in one round trip, each
// being lag. What it reads is the pauses and windows set.
func TestPauseStatesIsOneRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := migratedDB(t).Config()
	trips := &roundTrips{}
	cfg.ConnConfig.Tracer = trips
	db, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
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
