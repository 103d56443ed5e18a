package jobs

import (
	"context"
	"sync"
	"testing"

	"github.com/belfry/belfry/internal/pgtest"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Replicas started together each create the example's tables: on a fresh
// database every one of them must succeed, as a replica that failed would
// log a warning at start-up. Plain CREATE TABLE IF NOT EXISTS does not: two
// at once both find no table, and one fails on a unique index of the
// catalog. Each round drops the tables and creates them from many
// connections at once.
func TestConcurrentCreateTables(t *testing.T) {
	ctx := context.Background()
	const replicas, rounds = 8, 5
	cfg, err := pgxpool.ParseConfig(pgtest.NewDatabase(t, "belfry_jobs_test"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = replicas
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	rows, events := PostgresRows{Pool: pool}, PostgresEvents{Pool: pool}
	for round := range rounds {
		if _, err := pool.Exec(ctx, `DROP TABLE IF EXISTS example_soft_deleted, example_event, example_event_archive`); err != nil {
			t.Fatal(err)
		}
		// Each replica holds a connection of its own until all do, so that
		// the creations start together on separate sessions.
		ready, start := sync.WaitGroup{}, make(chan struct{})
		errs := make(chan error, 2*replicas)
		var created sync.WaitGroup
		ready.Add(replicas)
		for range replicas {
			created.Go(func() {
				conn, err := pool.Acquire(ctx)
				ready.Done()
				if err != nil {
					errs <- err
					return
				}
				<-start
				conn.Release()
				errs <- rows.CreateTable(ctx)
				errs <- events.CreateTables(ctx)
			})
		}
		ready.Wait()
		close(start)
		created.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Errorf("round %d: %v", round+1, err)
			}
		}
	}
}
