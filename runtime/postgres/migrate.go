package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migration is one version of belfry's schema.
type Migration struct {
	Version int
	Name    string // from the file name: 001_init.sql is "init"
	SQL     string
}

// Version is a migration applied to a database.
type Version struct {
	Version   int
	Name      string
	AppliedAt time.Time
}

// DB is what migrations run on: a *pgxpool.Pool or a *pgx.Conn.
type DB interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

var (
	// ErrSchemaNewer: the database holds a belfry schema version this
	// belfry does not know; a newer belfry migrated it.
	ErrSchemaNewer = errors.New("belfry schema is newer than this belfry")
	// ErrSchemaOutdated: the database lacks migrations this belfry needs.
	ErrSchemaOutdated = errors.New("belfry schema is missing or outdated")
)

var migrationName = regexp.MustCompile(`^(\d{3})_([a-z0-9_]+)\.sql$`)

// migrations are the embedded migrations in version order, checked once.
var migrations = mustLoadMigrations(migrationFiles)

func mustLoadMigrations(fsys fs.FS) []Migration {
	ms, err := loadMigrations(fsys)
	if err != nil {
		panic(err)
	}
	return ms
}

// loadMigrations reads migrations/NNN_name.sql: versions from 1, each
// once, none skipped.
func loadMigrations(fsys fs.FS) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, "migrations")
	if err != nil {
		return nil, err
	}
	var out []Migration
	for _, e := range entries {
		m := migrationName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("migrations/%s: want NNN_name.sql", e.Name())
		}
		sql, err := fs.ReadFile(fsys, "migrations/"+e.Name())
		if err != nil {
			return nil, err
		}
		v, _ := strconv.Atoi(m[1])
		out = append(out, Migration{Version: v, Name: m[2], SQL: string(sql)})
	}
	slices.SortFunc(out, func(a, b Migration) int { return a.Version - b.Version })
	for i, m := range out {
		if m.Version != i+1 {
			return nil, fmt.Errorf("migrations: version %d where %d belongs: versions run 1, 2, 3… with none skipped or repeated", m.Version, i+1)
		}
	}
	return out, nil
}

// Migrations returns belfry's migrations, oldest first.
func Migrations() []Migration { return slices.Clone(migrations) }

// Latest is the schema version this belfry needs.
func Latest() int { return migrations[len(migrations)-1].Version }

// migrationLock is the advisory lock key that serialises migrates: a
// fixed number, the same in every belfry ("belfry" in ASCII).
const migrationLock int64 = 0x62656c667279

// createVersionTable is idempotent, and runs under the lock so that two
// first migrates do not race on creating it.
const createVersionTable = `CREATE TABLE IF NOT EXISTS belfry_migration (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)`

// MigrateOptions choose what Migrate does besides belfry's tables.
type MigrateOptions struct {
	// River also applies River's migrations (rivermigrate) after
	// belfry's, under the same lock. Leave it false for a service that
	// migrates River itself.
	River bool
}

// Applied is what one Migrate did.
type Applied struct {
	// Belfry are the belfry versions applied, oldest first; empty when
	// the schema was up to date.
	Belfry []int
	// River are River's versions applied (with MigrateOptions.River), and
	// RiverVersion is River's schema version after them.
	River        []int
	RiverVersion int
}

// Migrate applies every belfry migration the database lacks, in one
// transaction, then (with opts.River) River's, each of River's versions in
// a transaction of its own as River's own migrator does (some of its
// versions add an enum value that the same transaction cannot use). The
// whole runs under a session advisory lock, so two migrates at once run
// one after the other and the second applies nothing; the connection is
// closed if that lock cannot be released. A migration that waits longer
// than migrationLockTimeout for a table fails, applying nothing, rather
// than hold up the queries queued behind it. It returns what it applied:
// nothing when the schema is up to date. A database at a belfry version
// newer than Latest is refused with ErrSchemaNewer. db is a
// *pgxpool.Pool or a *pgx.Conn.
func Migrate(ctx context.Context, db DB, opts MigrateOptions) (Applied, error) {
	conn, release, err := connOf(ctx, db)
	if err != nil {
		return Applied{}, err
	}
	defer release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", migrationLock); err != nil {
		return Applied{}, fmt.Errorf("taking the migration lock: %w", err)
	}
	defer func() {
		// A cancelled ctx must not keep the lock: the session would hold
		// it until the connection closes. A session whose unlock fails is
		// closed, so that no pooled connection keeps the lock and blocks
		// every later migrate.
		unlockCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		var unlocked bool
		if err := conn.QueryRow(unlockCtx, "SELECT pg_advisory_unlock($1)", migrationLock).Scan(&unlocked); err != nil || !unlocked {
			conn.Close(unlockCtx)
		}
	}()
	var out Applied
	if out.Belfry, err = migrateBelfry(ctx, conn); err != nil {
		return Applied{}, err
	}
	if opts.River {
		if out.River, out.RiverVersion, err = migrateRiver(ctx, conn); err != nil {
			return out, err
		}
	}
	return out, nil
}

// connOf is one connection of db, for the session the lock belongs to.
func connOf(ctx context.Context, db DB) (*pgx.Conn, func(), error) {
	switch db := db.(type) {
	case *pgxpool.Pool:
		c, err := db.Acquire(ctx)
		if err != nil {
			return nil, nil, err
		}
		return c.Conn(), c.Release, nil
	case *pgx.Conn:
		return db, func() {}, nil
	}
	return nil, nil, fmt.Errorf("postgres: Migrate wants a *pgxpool.Pool or a *pgx.Conn; got %T", db)
}

// migrationLockTimeout bounds how long a migration's statement waits for
// a table lock. A DDL statement queued behind a running service's long
// query would otherwise block every later query of that table while it
// waits; failing lets the operator run the migrate again when it is
// quieter.
const migrationLockTimeout = 5 * time.Second

// boundLockWaits sets migrationLockTimeout for tx alone.
func boundLockWaits(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, "SELECT set_config('lock_timeout', $1, true)", strconv.FormatInt(migrationLockTimeout.Milliseconds(), 10))
	return err
}

// migrateBelfry applies belfry's pending versions in one transaction.
func migrateBelfry(ctx context.Context, conn *pgx.Conn) ([]int, error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(ctx)
	if err := boundLockWaits(ctx, tx); err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, createVersionTable); err != nil {
		return nil, fmt.Errorf("creating belfry_migration: %w", err)
	}
	applied, err := appliedVersions(ctx, tx)
	if err != nil {
		return nil, err
	}
	if err := refuseNewer(applied); err != nil {
		return nil, err
	}
	var out []int
	for _, m := range migrations {
		if slices.ContainsFunc(applied, func(v Version) bool { return v.Version == m.Version }) {
			continue
		}
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return nil, fmt.Errorf("belfry migration %d (%s): %w", m.Version, m.Name, err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO belfry_migration (version, name) VALUES ($1, $2)", m.Version, m.Name); err != nil {
			return nil, fmt.Errorf("recording belfry migration %d: %w", m.Version, err)
		}
		out = append(out, m.Version)
	}
	return out, tx.Commit(ctx)
}

// migrateRiver applies River's pending versions, one transaction each,
// and returns the versions applied and River's version after them.
func migrateRiver(ctx context.Context, conn *pgx.Conn) (applied []int, version int, err error) {
	migrator, err := rivermigrate.New(riverpgxv5.New(nil), nil)
	if err != nil {
		return nil, 0, fmt.Errorf("river migrations: %w", err)
	}
	for {
		step, err := riverStep(ctx, conn, migrator)
		if err != nil {
			return applied, 0, fmt.Errorf("river migrations: %w", err)
		}
		if step == 0 {
			break
		}
		applied = append(applied, step)
	}
	version, err = riverVersion(ctx, conn, migrator)
	return applied, version, err
}

// RiverVersion is the newest River migration applied to the database, 0
// for none.
func RiverVersion(ctx context.Context, db DB) (int, error) {
	conn, release, err := connOf(ctx, db)
	if err != nil {
		return 0, err
	}
	defer release()
	migrator, err := rivermigrate.New(riverpgxv5.New(nil), nil)
	if err != nil {
		return 0, fmt.Errorf("river migrations: %w", err)
	}
	return riverVersion(ctx, conn, migrator)
}

func riverVersion(ctx context.Context, conn *pgx.Conn, migrator *rivermigrate.Migrator[pgx.Tx]) (int, error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(ctx)
	existing, err := migrator.ExistingVersionsTx(ctx, tx)
	if err != nil {
		return 0, fmt.Errorf("river migrations: %w", err)
	}
	if len(existing) == 0 {
		return 0, nil
	}
	return existing[len(existing)-1].Version, nil
}

// riverStep applies River's next version in its own transaction: the
// version applied, 0 when none was pending.
func riverStep(ctx context.Context, conn *pgx.Conn, migrator *rivermigrate.Migrator[pgx.Tx]) (int, error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(ctx)
	if err := boundLockWaits(ctx, tx); err != nil {
		return 0, err
	}
	res, err := migrator.MigrateTx(ctx, tx, rivermigrate.DirectionUp, &rivermigrate.MigrateOpts{MaxSteps: 1})
	if err != nil {
		return 0, err
	}
	if len(res.Versions) == 0 {
		return 0, nil
	}
	return res.Versions[0].Version, tx.Commit(ctx)
}

// refuseNewer refuses a database that a newer belfry migrated.
func refuseNewer(applied []Version) error {
	if len(applied) == 0 {
		return nil
	}
	if newest := applied[len(applied)-1]; newest.Version > Latest() {
		return fmt.Errorf("%w: the database is at belfry schema version %d (%s), and this belfry knows versions up to %d: "+
			"run a belfry at least as new as the one that migrated it", ErrSchemaNewer, newest.Version, newest.Name, Latest())
	}
	return nil
}

type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// appliedVersions reads belfry_migration, oldest first.
func appliedVersions(ctx context.Context, q querier) ([]Version, error) {
	rows, err := q.Query(ctx, "SELECT version, name, applied_at FROM belfry_migration ORDER BY version")
	if err != nil {
		return nil, fmt.Errorf("reading belfry_migration: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Version, error) {
		var v Version
		err := row.Scan(&v.Version, &v.Name, &v.AppliedAt)
		return v, err
	})
}

// Versions returns the belfry migrations applied to the database, oldest
// first; none when belfry was never migrated there.
func Versions(ctx context.Context, db DB) ([]Version, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(ctx)
	var exists bool
	if err := tx.QueryRow(ctx, "SELECT to_regclass('belfry_migration') IS NOT NULL").Scan(&exists); err != nil {
		return nil, err
	}
	if !exists {
		return nil, nil
	}
	return appliedVersions(ctx, tx)
}

// CurrentVersion is the newest belfry version applied, 0 for none.
func CurrentVersion(ctx context.Context, db DB) (int, error) {
	vs, err := Versions(ctx, db)
	if err != nil || len(vs) == 0 {
		return 0, err
	}
	return vs[len(vs)-1].Version, nil
}

// CheckSchema reports whether the database holds the schema this belfry
// needs: ErrSchemaOutdated (naming the command to run) when it is missing
// or older, ErrSchemaNewer when a newer belfry migrated it.
func CheckSchema(ctx context.Context, db DB) error {
	vs, err := Versions(ctx, db)
	if err != nil {
		return err
	}
	if err := refuseNewer(vs); err != nil {
		return err
	}
	current := 0
	if len(vs) > 0 {
		current = vs[len(vs)-1].Version
	}
	if current < Latest() {
		return fmt.Errorf("%w: the database is at belfry schema version %d and this belfry needs %d: "+
			"run belfry migrate --postgres URL (or postgres.Migrate) before starting the service", ErrSchemaOutdated, current, Latest())
	}
	return nil
}
