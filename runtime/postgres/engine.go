package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
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
//
// New returns one to give to core.New, which configures it
// (engine.Configurable) with the runtime's namespace, replica name, lease
// TTL, history limits, record TTL, logger and clock: one runtime's
// settings are never given twice, to the runtime and to its engine.
type Engine struct {
	pool  *pgxpool.Pool
	river *river.Client[pgx.Tx]
	ns    string
	// rt is the runtime's settings, as Configure was given them.
	rt            engine.Config
	slotRetention time.Duration
	log           *slog.Logger
	clock         engine.Clock
	onCall        atomic.Pointer[func(error)]
	// begin is inTx's start of a transaction, with its timeouts.
	begin pgx.TxOptions
	// own is what New was given, from which Configure builds the
	// runtime's engine; nil in the engine Configure built. taken is set by
	// the Configure that did, so that one Engine serves one runtime.
	own   *Config
	taken atomic.Bool
	election
}

var (
	_ engine.Engine         = (*Engine)(nil)
	_ engine.Configurable   = (*Engine)(nil)
	_ engine.Deliveries     = (*Engine)(nil)
	_ engine.Named          = (*Engine)(nil)
	_ engine.EnqueueBatches = (*Engine)(nil)
	_ engine.Canceler       = (*Engine)(nil)
)

// Defaults of the runtime's settings, for a Configure given none (the
// runtime always gives them): core's own.
const (
	LeaseTTLDefault     = 15 * time.Second
	HistoryLimitDefault = 50
	RecordTTLDefault    = 7 * 24 * time.Hour
)

// Config is what is the engine's own: the pool it works on, the River
// client that inserts its jobs, and how long slot rows are kept. The
// runtime's settings (namespace, replica, lease TTL, history, logger) come
// from core.New, through Configure.
type Config struct {
	// Pool reaches the database that Migrate prepared.
	Pool *pgxpool.Pool
	// River, when set, inserts the jobs (InsertManyTx in the engine's
	// transaction), with its hooks and middleware; by default an
	// insert-only client on Pool does.
	River *river.Client[pgx.Tx]
	// SlotRetention is how long slot rows are kept (PruneSlots, run by
	// the leader): at least every schedule's grace plus the runtime's
	// SkewMargin. Default SlotRetentionDefault.
	SlotRetention time.Duration
}

// ErrUnconfigured is what an Engine answers to a call made on it rather
// than on the runtime it was given to.
var ErrUnconfigured = errors.New("postgres.Engine must be passed to core.New (Options.Engine) before use")

// New returns an engine on cfg.Pool for core.New to configure. It makes
// no call to the database; CheckSchema says whether Migrate ran. Until
// core.New configures it, its calls fail with ErrUnconfigured.
func New(cfg Config) (*Engine, error) {
	if cfg.Pool == nil {
		return nil, errors.New("postgres: Config.Pool is nil")
	}
	cfg.SlotRetention = cmp.Or(cfg.SlotRetention, SlotRetentionDefault)
	if cfg.River == nil {
		// An insert-only client: it starts nothing, and its InsertManyTx
		// writes the jobs in the engine's own transaction.
		var err error
		if cfg.River, err = river.NewClient(riverpgxv5.New(cfg.Pool), &river.Config{}); err != nil {
			return nil, fmt.Errorf("postgres: River client: %w", err)
		}
	}
	refusing, err := refusingPool()
	if err != nil {
		return nil, err
	}
	e := build(Config{Pool: refusing, River: cfg.River, SlotRetention: cfg.SlotRetention},
		engine.Config{Namespace: "unconfigured", Replica: "unconfigured"})
	e.own = &cfg
	return e, nil
}

// Configure builds the engine of cfg's runtime on the pool New was
// given, once: an Engine serves one runtime.
func (e *Engine) Configure(cfg engine.Config) (engine.Engine, error) {
	switch {
	case e.own == nil:
		return nil, errors.New("postgres: this Engine was built by Configure; give core.New the one postgres.New returned")
	case !e.taken.CompareAndSwap(false, true):
		return nil, errors.New("Options.Engine: this postgres.Engine already serves another runtime; make one per runtime")
	case cfg.Namespace == "":
		return nil, errors.New("postgres: the runtime's Namespace is empty")
	case cfg.LeaseTTL != 0 && cfg.LeaseTTL < time.Second:
		return nil, fmt.Errorf("postgres: LeaseTTL must be at least 1s; got %s", cfg.LeaseTTL)
	}
	e.pool.Close() // the refusing pool: from now on its calls fail as closed
	return build(*e.own, cfg), nil
}

// build makes the engine of rt's runtime on own's pool, filling in what
// rt leaves out.
func build(own Config, rt engine.Config) *Engine {
	if rt.Replica == "" {
		host, _ := os.Hostname()
		rt.Replica = cmp.Or(host, "replica") + "-" + strconv.Itoa(os.Getpid())
	}
	rt.LeaseTTL = cmp.Or(rt.LeaseTTL, LeaseTTLDefault)
	rt.HistoryLimit = cmp.Or(rt.HistoryLimit, HistoryLimitDefault)
	rt.RecordTTL = cmp.Or(rt.RecordTTL, RecordTTLDefault)
	if rt.Logger == nil {
		rt.Logger = slog.Default()
	}
	if rt.Clock == nil {
		rt.Clock = realClock{}
	}
	e := &Engine{pool: own.Pool, river: own.River, ns: rt.Namespace, rt: rt, slotRetention: own.SlotRetention,
		log: rt.Logger, clock: rt.Clock, begin: beginOptions(rt.LeaseTTL)}
	e.election = newElection(e)
	return e
}

// refusingPool is a pool that connects nowhere: every call on it fails
// with ErrUnconfigured.
func refusingPool() (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig("postgres://unconfigured/unconfigured?sslmode=disable")
	if err != nil {
		return nil, err
	}
	cfg.ConnConfig.LookupFunc = func(_ context.Context, host string) ([]string, error) { return []string{host}, nil }
	cfg.ConnConfig.DialFunc = func(context.Context, string, string) (net.Conn, error) { return nil, ErrUnconfigured }
	return pgxpool.NewWithConfig(context.Background(), cfg)
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// EngineName is the engine's name in the health and status JSON.
func (e *Engine) EngineName() string { return "postgres" }

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

// Batches of slots due at once: a batch is one transaction, whose round
// trips and commit cost about the same whatever its size, so batches are
// large and few of them run at a time.
const (
	enqueueBatch         = 1000
	enqueueBatchInFlight = 2
)

// EnqueueBatches is the size of the batches of slots given to EnqueueAll
// when many are due at once, and how many run at a time.
func (e *Engine) EnqueueBatches() (size, inFlight int) {
	return enqueueBatch, enqueueBatchInFlight
}

// Acknowledged returns at once: a committed transaction is durable.
func (e *Engine) Acknowledged(context.Context) error { return nil }

// limitOf is the number of records the schedule name keeps.
func (e *Engine) limitOf(name string) int {
	if n, ok := e.rt.Limits[name]; ok {
		return n
	}
	return e.rt.HistoryLimit
}

// inTx runs f in a transaction, committed when f returns nil. The
// transaction ends itself if its client goes silent for a lease TTL
// (idle_in_transaction_session_timeout, for this transaction only): a
// replica cut off in the middle of an enqueue would otherwise keep its
// uncommitted slot rows locked until the server noticed the dead
// connection, and the next leader's insert of those slots would wait that
// long. No statement of it runs longer than a lease TTL either
// (statement_timeout): a fenced write holds the lease row (fenceSQL), and
// a takeover or renewal waits behind it at most that long.
func (e *Engine) inTx(ctx context.Context, f func(pgx.Tx) error) error {
	return pgx.BeginTxFunc(ctx, e.pool, e.begin, f)
}

// beginOptions start a transaction whose timeouts are ttl, in the round
// trip of its BEGIN (a query without parameters goes as one message,
// however many statements it has). It is READ COMMITTED whatever the
// database's default: a statement that waited for a lock (the fence's
// lease row, a family's lock) must see what the transaction it waited for
// committed, which a snapshot taken before the wait would not.
func beginOptions(ttl time.Duration) pgx.TxOptions {
	ms := strconv.FormatInt(ttl.Milliseconds(), 10)
	return pgx.TxOptions{BeginQuery: "BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL idle_in_transaction_session_timeout = " + ms + "; SET LOCAL statement_timeout = " + ms}
}
