// Service is a small service whose recurring work runs once per occurrence
// however many replicas run: the jobs package declares the schedules, the
// belfry runtime enqueues each due occurrence from whichever replica holds
// the lease, and every replica's workers run them. It runs on Redis with
// asynq, or on Postgres with River: the same schedules, admin page,
// metrics and health.
//
// Usage:
//
//	service [-redis URL | -redis-cluster ADDRS | -postgres URL [-migrate]] [-http ADDR] [-replica NAME] [-lease-ttl DURATION] [-namespace PREFIX]
//
// -redis-cluster runs on a Redis Cluster: its nodes' addresses,
// comma-separated (host:port,host:port,...), of which any reachable one
// tells the client the rest.
//
// The admin page is at http://ADDR/cron/, health at /healthz and /livez,
// metrics at /metrics. With -postgres the database must hold belfry's and
// River's tables: run `belfry migrate --postgres URL` first, as a deploy
// step, or pass -migrate (a single instance, a demo).
// With neither -redis nor -postgres (and REDIS_URL unset) the scheduler is
// disabled: the page still lists the schedules and their next runs, and
// nothing is enqueued or run.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/belfry/belfry/examples/service/jobs"
	"github.com/belfry/belfry/runtime"
	"github.com/belfry/belfry/runtime/admin"
	"github.com/belfry/belfry/runtime/core"
	"github.com/belfry/belfry/runtime/metrics"
)

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stderr))
}

type config struct {
	redisURL string
	// redisCluster are the nodes of a Redis Cluster to run on, if given.
	redisCluster []string
	postgresURL  string
	migrate      bool
	httpAddr     string
	replica      string
	leaseTTL     time.Duration
	namespace    string
	logLevel     slog.Level
	// seedEvents is how many events the example starts with;
	// archiveThrottle the archive job's wait before each batch.
	seedEvents      int
	archiveThrottle time.Duration
}

// exitUsage is the conventional status for bad flags, as flag.ExitOnError uses.
const exitUsage = 2

func parseFlags(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("service", flag.ContinueOnError)
	fs.StringVar(&c.redisURL, "redis", getenv("REDIS_URL"), "Redis `URL` (redis://host:6379/0, unix:///path/redis.sock); empty disables the scheduler (default $REDIS_URL)")
	fs.Func("redis-cluster", "Redis Cluster node `ADDRS`, comma-separated host:port (10.0.0.1:6379,10.0.0.2:6379,...): run on a cluster", func(v string) error {
		c.redisCluster = nil
		for _, addr := range strings.Split(v, ",") {
			addr = strings.TrimSpace(addr)
			if _, _, err := net.SplitHostPort(addr); err != nil {
				return fmt.Errorf("%q: want host:port", addr)
			}
			c.redisCluster = append(c.redisCluster, addr)
		}
		return nil
	})
	fs.StringVar(&c.postgresURL, "postgres", "", "Postgres `URL` (postgres://user@host:5432/db): run on Postgres and River instead of Redis")
	fs.BoolVar(&c.migrate, "migrate", false, "with -postgres, apply belfry's and River's migrations before starting (else run: belfry migrate --postgres URL)")
	fs.StringVar(&c.httpAddr, "http", "127.0.0.1:8080", "HTTP listen `ADDR` for the admin page at /cron/")
	fs.StringVar(&c.replica, "replica", "", "replica `NAME` in the lease and the admin page (default hostname-pid)")
	fs.DurationVar(&c.leaseTTL, "lease-ttl", runtime.LeaseTTLDefault, "how long the lease outlives a crashed holder")
	fs.StringVar(&c.namespace, "namespace", "", "`prefix` of the scheduler's Redis keys (or Postgres rows) and task IDs; every replica of the service must use the same one, other services another (default: derived from the jobs package, printed at start-up; \""+runtime.NamespaceLegacy+"\" for a deployment begun before it was derived)")
	fs.IntVar(&c.seedEvents, "seed-events", defaultSeedEvents, "how many `N` events the example starts with, for the archive-events job to copy")
	fs.DurationVar(&c.archiveThrottle, "archive-throttle", 10*time.Millisecond, "how long the archive-events job waits before each batch, leaving the store room for other queries")
	fs.TextVar(&c.logLevel, "log-level", slog.LevelInfo, "log `level`: debug (shows every heartbeat), info, warn or error")
	// The flag package prints the error and the whole usage on a bad flag;
	// a one-line error says more in a deploy log. -h still prints usage.
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stderr)
			fs.Usage()
		}
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q; all options are flags", fs.Arg(0))
	}
	redisFlag := false
	fs.Visit(func(f *flag.Flag) { redisFlag = redisFlag || f.Name == "redis" })
	switch {
	case c.postgresURL != "" && len(c.redisCluster) > 0:
		return c, errors.New("-redis-cluster and -postgres: the service runs on one engine; give one")
	case len(c.redisCluster) > 0 && redisFlag && c.redisURL != "":
		return c, errors.New("-redis and -redis-cluster: the service runs on one Redis; give one")
	case c.postgresURL != "" && redisFlag && c.redisURL != "":
		return c, errors.New("-redis and -postgres: the service runs on one engine; give one")
	}
	if c.postgresURL != "" || len(c.redisCluster) > 0 {
		c.redisURL = "" // $REDIS_URL is the default engine, not a second one
	}
	if c.migrate && c.postgresURL == "" {
		return c, errors.New("-migrate applies Postgres migrations; give -postgres URL too")
	}
	return c, nil
}

func run(args []string, getenv func(string) string, stderr io.Writer) int {
	cfg, err := parseFlags(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "service: %v (see -h)\n", err)
		return exitUsage
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: cfg.logLevel}))

	// Dependencies reach the handlers through the receiver NewRegistry
	// binds, not through package globals.
	deps := &jobs.Jobs{}
	reg := jobs.NewRegistry(deps)
	open := openRedis
	if cfg.postgresURL != "" {
		open = openPostgres
	}
	be, code := open(cfg, reg, log, stderr)
	if be == nil {
		return code
	}
	defer be.close()
	deps.DB = be.rows // before the workers start
	deps.Events, deps.ArchiveThrottle = be.events, cfg.archiveThrottle
	rt := be.rt
	log = log.With("replica", rt.Replica())
	// The jobs log through the default logger; the replica name says which
	// worker ran an occurrence.
	slog.SetDefault(log)

	// Listen before starting anything else, so a taken port is one clear
	// error and not a half-started replica.
	ln, err := net.Listen("tcp", cfg.httpAddr)
	if err != nil {
		log.Error("cannot serve the admin page", "err", err)
		return 1
	}

	signalled, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Cancelled by a signal, or with a cause when a part of the service fails.
	ctx, cancel := context.WithCancelCause(signalled)
	defer cancel(nil)

	if be.startWorkers != nil {
		if err := be.startWorkers(); err != nil {
			log.Error("cannot start the workers", "err", err)
			return 1
		}
	}

	var scheduler sync.WaitGroup
	if be.startWorkers != nil {
		scheduler.Go(func() { seedTenants(ctx, rt, log) })
		scheduler.Go(func() { seedSoftDeleted(ctx, be, log) })
		scheduler.Go(func() { seedEvents(ctx, be, cfg.seedEvents, log) })
	}
	scheduler.Go(func() {
		if err := rt.Run(ctx); err != nil {
			cancel(fmt.Errorf("scheduler: %w", err))
		}
	})

	mux := http.NewServeMux()
	// Metrics are mounted twice: inside the admin for a person, and at
	// /metrics for a scraper, which the host would keep outside its auth.
	metricsHandler := metrics.Handler(rt)
	mux.Handle("/cron/", http.StripPrefix("/cron", admin.New(rt, admin.Options{Metrics: metricsHandler})))
	mux.Handle("GET /metrics", metricsHandler)
	// Where the README's main.go mounts them, for alerts and for liveness
	// probes.
	mux.Handle("GET /healthz", rt.HealthHandler())
	mux.Handle("GET /livez", rt.LivezHandler())
	mux.Handle("GET /{$}", http.RedirectHandler("/cron/", http.StatusFound))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			cancel(fmt.Errorf("http: %w", err))
		}
	}()
	log.Info("serving", "admin", "http://"+ln.Addr().String()+"/cron/", be.kind, redact(be.url), "namespace", rt.Namespace())

	<-ctx.Done()
	var failed error
	if signalled.Err() != nil {
		log.Info("shutting down")
	} else {
		failed = context.Cause(ctx)
		log.Error("shutting down", "err", failed)
	}
	// The order matters: stop taking requests, hand the lease to a follower
	// (Run releases it as it returns), then let running tasks finish.
	shutdownCtx, cancelShutdown := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelShutdown()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		log.Warn("http shutdown", "err", err)
	}
	scheduler.Wait()
	if be.stopWorkers != nil {
		be.stopWorkers()
	}
	if failed != nil {
		return 1
	}
	log.Info("stopped")
	return 0
}

// redact hides a password in a Redis or Postgres URL before it reaches a
// log.
func redact(rawURL string) string {
	if rawURL == "" {
		return "none"
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

func redactErr(err error, rawURL string) string {
	msg := err.Error()
	if u, perr := url.Parse(rawURL); perr == nil && u.User != nil {
		if p, ok := u.User.Password(); ok && p != "" {
			msg = strings.ReplaceAll(msg, p, "xxxxx")
		}
	}
	return msg
}

// seededRows is how many soft-deleted rows the example starts with: more
// than one batch of the prune job, so that a run of it shows its progress.
const seededRows = 5000

// seedSoftDeleted gives the prune job rows to remove: seededRows rows
// soft-deleted 40 days ago, which "Run now" on prune-soft-deleted purges.
// Rows already there are kept.
func seedSoftDeleted(ctx context.Context, be *backend, log *slog.Logger) {
	if be.seedRows == nil {
		return
	}
	ids := make([]string, seededRows)
	for i := range ids {
		ids[i] = fmt.Sprintf("row-%05d", i+1)
	}
	if err := be.seedRows(ctx, ids, time.Now().Add(-40*24*time.Hour)); err != nil {
		if ctx.Err() == nil {
			log.Warn("could not seed the soft-deleted rows the prune job removes", "err", err)
		}
		return
	}
	log.Info("seeded soft-deleted rows", "rows", len(ids))
}

// defaultSeedEvents is how many events the example starts with: enough
// batches of the archive job to watch its progress on the admin page.
const defaultSeedEvents = 10000

// seedEvents gives the archive job n events to copy, keeping those there.
func seedEvents(ctx context.Context, be *backend, n int, log *slog.Logger) {
	if be.seedEvents == nil || n <= 0 {
		return
	}
	if err := be.seedEvents(ctx, n); err != nil {
		if ctx.Err() == nil {
			log.Warn("could not seed the events the archive job copies", "err", err)
		}
		return
	}
	log.Info("seeded events", "events", n)
}

// seedTenants gives the weekly-report family the example's tenants when it
// has no members yet, so that members changed or deleted through the admin
// stay as they are across restarts. Every replica tries; the writes are
// idempotent, so two replicas seeding at once leave the same members. It
// retries until the engine's store answers.
func seedTenants(ctx context.Context, rt *core.Runtime, log *slog.Logger) {
	members := make([]core.Member, len(jobs.SeedTenants))
	for i, t := range jobs.SeedTenants {
		members[i] = core.Member{Key: t.Key, Zone: t.Zone, Expr: t.Expr}
	}
	for {
		n, err := rt.Families().Count(ctx, jobs.TaskWeeklyReport)
		if err == nil && n > 0 {
			return
		}
		if err == nil {
			if err = rt.Families().SetMany(ctx, jobs.TaskWeeklyReport, members); err == nil {
				log.Info("seeded the weekly-report family", "tenants", len(members))
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}
