package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/belfry/belfry/internal/pgtest"
	"github.com/belfry/belfry/runtime/postgres"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// freshDB creates an empty database for the test, dropped when it ends,
// and returns a pool on it.
func freshDB(t testing.TB) *pgxpool.Pool {
	t.Helper()
	cfg := newDatabase(t)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// newDatabase creates an empty database, dropped (its connections ended)
// when t ends, and returns a pool configuration for it.
func newDatabase(t testing.TB) *pgxpool.Config {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.NewDatabase(t, "belfry_test"))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestMigrateFromEmptyThenNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := freshDB(t)
	if err := postgres.CheckSchema(ctx, db); !errors.Is(err, postgres.ErrSchemaOutdated) || !strings.Contains(err.Error(), "belfry migrate --postgres") {
		t.Errorf("CheckSchema of an empty database = %v, want ErrSchemaOutdated naming the command", err)
	}
	applied, err := postgres.Migrate(ctx, db, postgres.MigrateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{1, 2, 3, 4, 5, 6, 7}; !slices.Equal(applied.Belfry, want) || applied.River != nil {
		t.Errorf("first Migrate applied %+v, want belfry %v and no River", applied, want)
	}
	for _, table := range []string{"belfry_slot", "belfry_manual", "belfry_cursor", "belfry_record", "belfry_pause",
		"belfry_member", "belfry_counter", "belfry_leader", "belfry_replica", "belfry_progress", "belfry_unfinished", "belfry_pause_version"} {
		var exists bool
		if err := db.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", table).Scan(&exists); err != nil || !exists {
			t.Errorf("table %s missing after Migrate (%v)", table, err)
		}
	}
	var riverTable bool
	db.QueryRow(ctx, "SELECT to_regclass('river_job') IS NOT NULL").Scan(&riverTable)
	if riverTable {
		t.Error("River's tables were created though MigrateOptions.River was false")
	}

	again, err := postgres.Migrate(ctx, db, postgres.MigrateOptions{})
	if err != nil || len(again.Belfry) != 0 {
		t.Errorf("second Migrate applied %+v (%v), want nothing", again, err)
	}
	versions, err := postgres.Versions(ctx, db)
	if err != nil || len(versions) != 7 || versions[0].Version != 1 || versions[0].Name != "init" || versions[0].AppliedAt.IsZero() ||
		versions[1].Version != 2 || versions[1].Name != "engine" || versions[2].Version != 3 || versions[2].Name != "retention" ||
		versions[3].Version != 4 || versions[3].Name != "overlap" || versions[4].Version != 5 || versions[4].Name != "progress" ||
		versions[5].Version != 6 || versions[5].Name != "member_room" || versions[6].Version != 7 || versions[6].Name != "pause_version" {
		t.Errorf("Versions = %+v, %v; want versions 1 (init), 2 (engine), 3 (retention), 4 (overlap), 5 (progress), 6 (member_room) and 7 (pause_version) with their times", versions, err)
	}
	if err := postgres.CheckSchema(ctx, db); err != nil {
		t.Errorf("CheckSchema after Migrate: %v", err)
	}
}

// previousVersionDB is a database at the previous belfry version (all
// but the latest migration applied), and those migrations.
func previousVersionDB(t *testing.T) (*pgxpool.Pool, []postgres.Migration) {
	t.Helper()
	return databaseAt(t, postgres.Latest()-1)
}

// databaseAt is a database at belfry version v, and the migrations
// applied.
func databaseAt(t *testing.T, v int) (*pgxpool.Pool, []postgres.Migration) {
	t.Helper()
	ctx := context.Background()
	db := freshDB(t)
	if _, err := db.Exec(ctx, `CREATE TABLE belfry_migration (version integer PRIMARY KEY, name text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		t.Fatal(err)
	}
	previous := postgres.Migrations()[:v]
	for _, m := range previous {
		if _, err := db.Exec(ctx, m.SQL); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(ctx, `INSERT INTO belfry_migration (version, name) VALUES ($1, $2)`, m.Version, m.Name); err != nil {
			t.Fatal(err)
		}
	}
	return db, previous
}

// A migration that must wait for a table a running service holds gives
// up after a bound, applying nothing and keeping no lock, rather than
// queue every later query of that table behind it; run again once the
// table is free, it applies.
func TestAMigrateBlockedByATableGivesUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Version 3 alters belfry_slot, which the reader below holds.
	const before = 2
	db, _ := databaseAt(t, before)
	reader, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Rollback(ctx)
	if _, err := reader.Exec(ctx, "LOCK TABLE belfry_slot, belfry_record IN ACCESS SHARE MODE"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := postgres.Migrate(ctx, db, postgres.MigrateOptions{})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Migrate went through a table another session held")
		}
	case <-time.After(30 * time.Second):
		reader.Rollback(ctx) // let the waiting migrate end with the test
		t.Fatal("Migrate still waits for the held table after 30s; want it to give up")
	}
	if v, err := postgres.CurrentVersion(ctx, db); err != nil || v != before {
		t.Errorf("version after the failed migrate %d (%v), want %d", v, err, before)
	}
	if n := count(t, db, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"); n != 0 {
		t.Errorf("%d advisory locks held after the failed migrate; want none", n)
	}
	if err := reader.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if applied, err := postgres.Migrate(ctx, db, postgres.MigrateOptions{}); err != nil || len(applied.Belfry) != postgres.Latest()-before {
		t.Errorf("Migrate once the table is free: %+v, %v; want versions %d to %d applied", applied, err, before+1, postgres.Latest())
	}
}

// A database at the previous version (all but the latest) is upgraded by
// the latest, and then answers CheckSchema.
func TestMigrateFromThePreviousVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, previous := previousVersionDB(t)
	if err := postgres.CheckSchema(ctx, db); !errors.Is(err, postgres.ErrSchemaOutdated) {
		t.Errorf("CheckSchema at version %d = %v, want ErrSchemaOutdated", len(previous), err)
	}
	applied, err := postgres.Migrate(ctx, db, postgres.MigrateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{postgres.Latest()}; !slices.Equal(applied.Belfry, want) {
		t.Errorf("Migrate from version %d applied %v, want %v", len(previous), applied.Belfry, want)
	}
	if err := postgres.CheckSchema(ctx, db); err != nil {
		t.Errorf("CheckSchema after the upgrade: %v", err)
	}
}

func TestMigrateAppliesRiversMigrationsToo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := freshDB(t)
	applied, err := postgres.Migrate(ctx, db, postgres.MigrateOptions{River: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(applied.Belfry) != postgres.Latest() || len(applied.River) == 0 || applied.River[0] != 1 || applied.RiverVersion != applied.River[len(applied.River)-1] {
		t.Errorf("Migrate with River applied %+v, want every belfry version and River from 1", applied)
	}
	var riverTable bool
	if err := db.QueryRow(ctx, "SELECT to_regclass('river_job') IS NOT NULL").Scan(&riverTable); err != nil || !riverTable {
		t.Errorf("river_job missing (%v)", err)
	}
	if v, err := postgres.RiverVersion(ctx, db); err != nil || v != applied.RiverVersion {
		t.Errorf("RiverVersion = %d, %v; want %d", v, err, applied.RiverVersion)
	}
	again, err := postgres.Migrate(ctx, db, postgres.MigrateOptions{River: true})
	if err != nil || len(again.Belfry) != 0 || len(again.River) != 0 || again.RiverVersion != applied.RiverVersion {
		t.Errorf("second Migrate applied %+v (%v), want nothing, River still at %d", again, err, applied.RiverVersion)
	}
}

func TestConcurrentMigratesApplyEachVersionOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := freshDB(t)
	const migrators = 6
	results := make([]postgres.Applied, migrators)
	errs := make([]error, migrators)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range migrators {
		wg.Go(func() {
			<-start
			// Each on a connection of its own, as separate processes are.
			conn, err := pgx.ConnectConfig(ctx, db.Config().ConnConfig)
			if err != nil {
				errs[i] = err
				return
			}
			defer conn.Close(ctx)
			results[i], errs[i] = postgres.Migrate(ctx, conn, postgres.MigrateOptions{River: true})
		})
	}
	close(start)
	wg.Wait()
	belfry, river := map[int]int{}, map[int]int{}
	for i := range migrators {
		if errs[i] != nil {
			t.Fatalf("migrator %d: %v", i, errs[i])
		}
		for _, v := range results[i].Belfry {
			belfry[v]++
		}
		for _, v := range results[i].River {
			river[v]++
		}
	}
	if len(belfry) != postgres.Latest() || slices.ContainsFunc(slices.Collect(maps.Values(belfry)), func(n int) bool { return n != 1 }) {
		t.Errorf("belfry versions applied (version: times) %v, want each of 1..%d once", belfry, postgres.Latest())
	}
	if len(river) == 0 {
		t.Error("no River version applied")
	}
	for v, n := range river {
		if n != 1 {
			t.Errorf("River version %d applied %d times", v, n)
		}
	}
}

func TestADatabaseANewerBelfryMigratedIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := freshDB(t)
	if _, err := postgres.Migrate(ctx, db, postgres.MigrateOptions{}); err != nil {
		t.Fatal(err)
	}
	newer := postgres.Latest() + 1
	if _, err := db.Exec(ctx, "INSERT INTO belfry_migration (version, name) VALUES ($1, 'from_the_future')", newer); err != nil {
		t.Fatal(err)
	}
	_, err := postgres.Migrate(ctx, db, postgres.MigrateOptions{})
	if !errors.Is(err, postgres.ErrSchemaNewer) || !strings.Contains(err.Error(), fmt.Sprintf("version %d (from_the_future)", newer)) {
		t.Errorf("Migrate on a newer schema = %v, want ErrSchemaNewer naming version %d", err, newer)
	}
	if err := postgres.CheckSchema(ctx, db); !errors.Is(err, postgres.ErrSchemaNewer) {
		t.Errorf("CheckSchema on a newer schema = %v, want ErrSchemaNewer", err)
	}
}

func TestTheSlotTableAdmitsEachSlotOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := freshDB(t)
	if _, err := postgres.Migrate(ctx, db, postgres.MigrateOptions{}); err != nil {
		t.Fatal(err)
	}
	slot := time.Date(2026, 12, 4, 3, 17, 0, 0, time.UTC)
	insert := `INSERT INTO belfry_slot (namespace, schedule, member, slot, occurrence_id) VALUES ($1, $2, $3, $4, $5)`
	if _, err := db.Exec(ctx, insert, "ns", "nightly", "", slot, "cron:ns/nightly:1"); err != nil {
		t.Fatal(err)
	}
	// The same slot again, even from a planner whose clock wrote another
	// time zone: refused by the primary key.
	_, err := db.Exec(ctx, insert, "ns", "nightly", "", slot.In(time.FixedZone("CET", 3600)), "cron:ns/nightly:1-again")
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23505" || pgErr.ConstraintName != "belfry_slot_pkey" {
		t.Fatalf("second insert of one slot = %v, want a unique violation of belfry_slot_pkey", err)
	}
	// What a planner runs: the loser inserts nothing, and knows it.
	tag, err := db.Exec(ctx, insert+" ON CONFLICT DO NOTHING", "ns", "nightly", "", slot, "cron:ns/nightly:1")
	if err != nil || tag.RowsAffected() != 0 {
		t.Errorf("ON CONFLICT DO NOTHING on a taken slot: %v rows, %v; want 0", tag.RowsAffected(), err)
	}
	// Another member, namespace or slot is another row.
	for _, row := range [][]any{
		{"ns", "nightly", "acme", slot, "m"},
		{"other", "nightly", "", slot, "o"},
		{"ns", "nightly", "", slot.Add(24 * time.Hour), "n"},
	} {
		if _, err := db.Exec(ctx, insert, row...); err != nil {
			t.Errorf("insert %v: %v", row, err)
		}
	}
}
