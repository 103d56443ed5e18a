package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/belfry/belfry/runtime/engine"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
)

// Engine is belfry's Postgres engine of one namespace: the slot table and
// River's InsertTx in one transaction, the lease row, and belfry's own
// tables for cursors, records, pauses, members and counters. Its writes
// are committed transactions, which Postgres does not lose: it needs none
// of the Redis engine's compensations (engine.Losses, engine.Starts).
type Engine struct {
	pool   *pgxpool.Pool
	river  *river.Client[pgx.Tx]
	ns     string
	cfg    Config
	log    *slog.Logger
	onCall atomic.Pointer[func(error)]
	// idleTimeout is the lease TTL in ms, as inTx sets it.
	idleTimeout string
	election
}

var (
	_ engine.Engine     = (*Engine)(nil)
	_ engine.Deliveries = (*Engine)(nil)
)

// Defaults of Config.
const (
	LeaseTTLDefault     = 15 * time.Second
	HistoryLimitDefault = 50
)

// Config is what an Engine is built from: the pool it works on and the
// values the runtime that uses it is configured with.
type Config struct {
	// Pool reaches the database that Migrate prepared.
	Pool *pgxpool.Pool
	// River, when set, inserts the jobs (InsertManyTx in the engine's
	// transaction), with its hooks and middleware; by default an
	// insert-only client on Pool does.
	River *river.Client[pgx.Tx]
	// Namespace keys every row, so that services (or test runs) share a
	// database without sharing a row. Use the runtime's Namespace.
	Namespace string
	// Replica names this process in the lease and heartbeats; default
	// hostname-pid, as the runtime's Options.Replica.
	Replica string
	// LeaseTTL is how long the lease outlives its holder.
	LeaseTTL time.Duration
	// HistoryLimit is the records kept per schedule; Limits the schedules
	// that keep fewer, by name.
	HistoryLimit int
	Limits       map[string]int
	// SlotRetention is how long slot rows are kept (PruneSlots, run by
	// the leader): at least every schedule's grace plus the runtime's
	// SkewMargin. Default SlotRetentionDefault.
	SlotRetention time.Duration
	Logger        *slog.Logger
}

// New builds the engine of cfg.Namespace on cfg.Pool. It makes no call to
// the database; CheckSchema says whether Migrate ran.
func New(cfg Config) (*Engine, error) {
	if cfg.Pool == nil {
		return nil, errors.New("postgres: Config.Pool is nil")
	}
	if cfg.Namespace == "" {
		return nil, errors.New("postgres: Config.Namespace must be set, to the runtime's Options.Namespace")
	}
	if cfg.Replica == "" {
		host, _ := os.Hostname()
		cfg.Replica = cmp.Or(host, "replica") + "-" + strconv.Itoa(os.Getpid())
	}
	cfg.LeaseTTL = cmp.Or(cfg.LeaseTTL, LeaseTTLDefault)
	cfg.HistoryLimit = cmp.Or(cfg.HistoryLimit, HistoryLimitDefault)
	cfg.SlotRetention = cmp.Or(cfg.SlotRetention, SlotRetentionDefault)
	if cfg.LeaseTTL < time.Second {
		return nil, fmt.Errorf("postgres: LeaseTTL must be at least 1s; got %s", cfg.LeaseTTL)
	}
	rc := cfg.River
	if rc == nil {
		// An insert-only client: it starts nothing, and its InsertManyTx
		// writes the jobs in the engine's own transaction.
		var err error
		if rc, err = river.NewClient(riverpgxv5.New(cfg.Pool), &river.Config{}); err != nil {
			return nil, fmt.Errorf("postgres: River client: %w", err)
		}
	}
	e := &Engine{pool: cfg.Pool, river: rc, ns: cfg.Namespace, cfg: cfg, log: cmp.Or(cfg.Logger, slog.Default()),
		idleTimeout: strconv.FormatInt(cfg.LeaseTTL.Milliseconds(), 10)}
	e.election = newElection(e)
	return e, nil
}

// Watch has the election's calls reported to onCall.
func (e *Engine) Watch(onCall func(error)) { e.onCall.Store(&onCall) }

// called reports an election call's outcome to Watch's function, if any.
func (e *Engine) called(err error) {
	if f := e.onCall.Load(); f != nil {
		(*f)(explainSchema(err))
	}
}

// SQLSTATEs of what a missing or old schema lacks.
const (
	undefinedTable    = "42P01"
	undefinedFunction = "42883"
	undefinedColumn   = "42703"
)

// explainSchema turns a database's "no such table" or "no such function"
// into ErrSchemaOutdated, which names the command that creates them.
func explainSchema(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == undefinedTable || pgErr.Code == undefinedFunction || pgErr.Code == undefinedColumn) {
		return fmt.Errorf("%w: %s; run belfry migrate --postgres URL (or postgres.Migrate) before starting the service", ErrSchemaOutdated, pgErr.Message)
	}
	return err
}

// Time is the database's clock, which every replica shares.
func (e *Engine) Time(ctx context.Context) (time.Time, error) {
	var now time.Time
	err := e.pool.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&now)
	return now, err
}

// Acknowledged returns at once: a committed transaction is durable.
func (e *Engine) Acknowledged(context.Context) error { return nil }

// limitOf is the number of records the schedule name keeps.
func (e *Engine) limitOf(name string) int {
	if n, ok := e.cfg.Limits[name]; ok {
		return n
	}
	return e.cfg.HistoryLimit
}

// inTx runs f in a transaction, committed when f returns nil. The
// transaction ends itself if its client goes silent for a lease TTL
// (idle_in_transaction_session_timeout, for this transaction only): a
// replica cut off in the middle of an enqueue would otherwise keep its
// uncommitted slot rows locked until the server noticed the dead
// connection, and the next leader's insert of those slots would wait that
// long.
func (e *Engine) inTx(ctx context.Context, f func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT set_config('idle_in_transaction_session_timeout', $1, true)", e.idleTimeout); err != nil {
			return err
		}
		return f(tx)
	})
}
