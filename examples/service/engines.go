package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/belfry/belfry/examples/service/jobs"
	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
	"github.com/belfry/belfry/runtime/core"
	"github.com/belfry/belfry/runtime/postgres"
	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
)

// backend is the runtime on its engine, and the workers that run its
// occurrences: asynq's on Redis, River's on Postgres.
type backend struct {
	rt   *core.Runtime
	kind string // "redis" or "postgres", as the start-up log names it
	url  string
	// startWorkers and stopWorkers are nil when the scheduler is
	// disabled: there is nothing to run.
	startWorkers func() error
	// stopWorkers lets running occurrences finish; called after the
	// runtime's Run returned (the lease handed over).
	stopWorkers func()
	close       func()
	// rows are the soft-deleted rows the prune job removes, kept in the
	// engine's own store; seedRows adds the demo's, nil without a store.
	rows     jobs.SoftDeletedRows
	seedRows func(ctx context.Context, ids []string, at time.Time) error
	// events are the events the archive job copies, in the same store;
	// seedEvents adds the demo's.
	events     jobs.Events
	seedEvents func(ctx context.Context, n int) error
}

// workerShutdown is how long running occurrences may take to finish at a
// shutdown.
const workerShutdown = 10 * time.Second

// queues are the example's queues and how many of each run at once on a
// replica.
var queues = map[string]int{"default": 3, "maintenance": 1}

// openRedis is the backend on the Redis at cfg.redisURL, or a disabled
// scheduler without one. It reports a failure on stderr, with the exit
// status to end with.
func openRedis(cfg config, reg *registry.Registry, log *slog.Logger, stderr io.Writer) (*backend, int) {
	var rdb redis.UniversalClient
	if len(cfg.redisCluster) > 0 {
		// ContextTimeoutEnabled as for a single Redis, below.
		rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: cfg.redisCluster, ContextTimeoutEnabled: true})
	}
	if cfg.redisURL != "" {
		opts, err := redis.ParseURL(cfg.redisURL)
		if err != nil {
			fmt.Fprintf(stderr, "service: -redis %s: %v; want e.g. redis://127.0.0.1:6379/0\n", redact(cfg.redisURL), redactErr(err, cfg.redisURL))
			return nil, exitUsage
		}
		// Without it go-redis ignores the admin's and health's deadlines
		// and waits out its read timeout (and retries) on a stalled Redis.
		opts.ContextTimeoutEnabled = true
		rdb = redis.NewClient(opts)
	}
	rt, err := runtime.New(reg, runtime.Options{
		Redis: rdb, Logger: log, Replica: cfg.replica, LeaseTTL: cfg.leaseTTL, Namespace: cfg.namespace,
	})
	if err != nil {
		fmt.Fprintf(stderr, "service: %v\n", err)
		if rdb != nil {
			rdb.Close()
		}
		return nil, exitUsage
	}
	kind, url := "redis", cfg.redisURL
	if len(cfg.redisCluster) > 0 {
		kind, url = "redis_cluster", strings.Join(cfg.redisCluster, ",")
	}
	be := &backend{rt: rt.Runtime, kind: kind, url: url, rows: jobs.NewDB(), close: func() {
		rt.Close()
		if rdb != nil {
			rdb.Close()
		}
	}}
	if rdb == nil {
		return be, 0
	}
	redisRows := jobs.RedisRows{Client: rdb, Key: rt.Namespace() + ":example:soft-deleted"}
	be.rows, be.seedRows = redisRows, redisRows.SoftDelete
	// One hash tag for the events and their archive, which one script
	// writes together.
	redisEvents := jobs.RedisEvents{Client: rdb, Key: rt.Namespace() + ":example:{events}"}
	be.events, be.seedEvents = redisEvents, redisEvents.Seed
	workers := asynq.NewServerFromRedisClient(rdb, asynq.Config{
		Queues:          queues,
		Logger:          runtime.AsynqLogger(log.With("component", "asynq")),
		LogLevel:        runtime.AsynqLogLevel(cfg.logLevel),
		ShutdownTimeout: workerShutdown,
	})
	be.startWorkers = func() error {
		mux := asynq.NewServeMux()
		rt.RegisterHandlers(mux)
		return workers.Start(mux)
	}
	be.stopWorkers = workers.Shutdown
	return be, 0
}

// openPostgres is the backend on the Postgres database at cfg.postgresURL,
// with River's workers. It checks the schema, or migrates it with
// cfg.migrate, and reports a failure on stderr, with the exit status to
// end with.
func openPostgres(cfg config, reg *registry.Registry, log *slog.Logger, stderr io.Writer) (*backend, int) {
	fail := func(code int, err error) (*backend, int) {
		fmt.Fprintf(stderr, "service: -postgres %s: %s\n", redact(cfg.postgresURL), redactErr(err, cfg.postgresURL))
		return nil, code
	}
	poolCfg, err := pgxpool.ParseConfig(cfg.postgresURL)
	if err != nil {
		return fail(exitUsage, err)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), poolCfg)
	if err != nil {
		return fail(exitUsage, err)
	}
	ok := false
	defer func() {
		if !ok {
			pool.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if cfg.migrate {
		applied, err := postgres.Migrate(ctx, pool, postgres.MigrateOptions{River: true})
		if err != nil {
			return fail(1, fmt.Errorf("migrating: %w", err))
		}
		log.Info("migrated", "belfry", applied.Belfry, "river", applied.River)
	} else if err := postgres.CheckSchema(ctx, pool); errors.Is(err, postgres.ErrSchemaOutdated) || errors.Is(err, postgres.ErrSchemaNewer) {
		return fail(1, err)
	} else if err != nil {
		// Unreachable for now: the runtime reports the engine down and
		// keeps trying, as it does on Redis.
		log.Warn("could not check the belfry schema; starting anyway", "err", err)
	}
	rows := jobs.PostgresRows{Pool: pool}
	if err := rows.CreateTable(ctx); err != nil {
		log.Warn("could not create the example's table of soft-deleted rows", "err", err)
	}
	events := jobs.PostgresEvents{Pool: pool}
	if err := events.CreateTables(ctx); err != nil {
		log.Warn("could not create the example's tables of events", "err", err)
	}
	eng, err := postgres.New(postgres.Config{Pool: pool})
	if err != nil {
		return fail(1, err)
	}
	rt, err := core.New(reg, core.Options{Engine: eng, Logger: log, Replica: cfg.replica, LeaseTTL: cfg.leaseTTL, Namespace: cfg.namespace})
	if err != nil {
		fmt.Fprintf(stderr, "service: %v\n", err)
		return nil, exitUsage
	}
	workers := river.NewWorkers()
	if err := postgres.AddWorkers(workers, rt); err != nil {
		return fail(1, err)
	}
	riverQueues := map[string]river.QueueConfig{}
	for q, n := range queues {
		riverQueues[q] = river.QueueConfig{MaxWorkers: n}
	}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues: riverQueues, Workers: workers, Logger: riverLogger(log, cfg.logLevel),
		// A crashed replica's job runs again a minute after it began, or
		// after its own timeout if that is longer, rather than after
		// River's default hour: a checkpointed one resumes after its last
		// batch.
		RescueStuckJobsAfter: time.Minute,
	})
	if err != nil {
		return fail(1, err)
	}
	ok = true
	// The workers' context outlives the signal: a shutdown stops the
	// scheduler first, then lets running occurrences finish (Stop), and
	// cancels them only when they overrun.
	workCtx, cancelWork := context.WithCancel(context.Background())
	return &backend{rt: rt, kind: "postgres", url: cfg.postgresURL, rows: rows, seedRows: rows.SoftDelete,
		events: events, seedEvents: events.Seed,
		startWorkers: func() error { return client.Start(workCtx) },
		stopWorkers: func() {
			ctx, cancel := context.WithTimeout(context.Background(), workerShutdown)
			defer cancel()
			if err := client.Stop(ctx); err != nil {
				log.Warn("running occurrences did not finish in time; cancelling them", "err", err)
				cancelWork()
			}
		},
		close: func() {
			cancelWork()
			rt.Close()
			pool.Close()
		},
	}, 0
}

// riverLogger is River's logger: warnings and errors, and everything at
// -log-level debug. River logs routine progress (its job counts, every
// few seconds) at info, which would drown the service's own lines.
func riverLogger(log *slog.Logger, level slog.Level) *slog.Logger {
	least := slog.LevelWarn
	if level <= slog.LevelDebug {
		least = level
	}
	return slog.New(atLeast{log.Handler(), least}).With("component", "river")
}

// atLeast passes on only the records at least at its level.
type atLeast struct {
	slog.Handler
	least slog.Level
}

func (h atLeast) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.least && h.Handler.Enabled(ctx, l)
}

func (h atLeast) WithAttrs(attrs []slog.Attr) slog.Handler {
	return atLeast{h.Handler.WithAttrs(attrs), h.least}
}

func (h atLeast) WithGroup(name string) slog.Handler {
	return atLeast{h.Handler.WithGroup(name), h.least}
}
