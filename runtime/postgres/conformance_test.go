package postgres_test

import (
	"context"
	"crypto/rand"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/belfry/belfry/internal/netfault"
	"github.com/belfry/belfry/runtime/core"
	"github.com/belfry/belfry/runtime/enginetest"
	"github.com/belfry/belfry/runtime/postgres"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
)

// The Postgres engine passes the conformance suite every engine runs.
func TestConformance(t *testing.T) {
	enginetest.Run(t, pgHarness{})
}

// pgHarness gives each case a database of its own on the machine's
// Postgres, migrated with belfry's and River's migrations; each replica an
// engine on a pool through a proxy of its own; and a River client working
// every schedule's queue on a direct pool.
type pgHarness struct{}

func (pgHarness) NewBackend(t testing.TB) enginetest.Backend {
	cfg := newDatabase(t)
	ctx := context.Background()
	pool, err := pgxpool.NewWithConfig(ctx, cfg.Copy())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := postgres.Migrate(ctx, pool, postgres.MigrateOptions{River: true}); err != nil {
		t.Fatalf("migrating: %v", err)
	}
	return &pgBackend{cfg: cfg, direct: pool, namespace: "conformance-" + strings.ToLower(rand.Text()[:8])}
}

type pgBackend struct {
	cfg       *pgxpool.Config
	direct    *pgxpool.Pool
	namespace string
	replicas  atomic.Int32
}

func (b *pgBackend) Replica(t testing.TB) (core.Options, enginetest.Link) {
	pool, proxy := poolThroughProxy(t, b.cfg)
	eng, err := postgres.New(postgres.Config{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	return core.Options{Engine: eng, Namespace: b.namespace}, proxy
}

func (b *pgBackend) StartWorkers(t testing.TB, rt *core.Runtime) {
	workers := river.NewWorkers()
	if err := postgres.AddWorkers(workers, rt); err != nil {
		t.Fatal(err)
	}
	queues := map[string]river.QueueConfig{}
	for _, s := range rt.Registry().Schedules() {
		queues[s.Queue] = river.QueueConfig{MaxWorkers: 8}
	}
	client, err := river.NewClient(riverpgxv5.New(b.direct), &river.Config{
		Queues: queues, Workers: workers, Logger: quietLogger(),
		FetchCooldown: 10 * time.Millisecond, FetchPollInterval: 50 * time.Millisecond,
		RetryPolicy: promptRetry{},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		client.Stop(ctx)
	})
}

// poolThroughProxy is a pool on cfg's database whose connections go
// through a proxy of their own.
func poolThroughProxy(t testing.TB, cfg *pgxpool.Config) (*pgxpool.Pool, *netfault.Proxy) {
	t.Helper()
	proxy := netfault.New(t, "tcp", net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))))
	cfg = cfg.Copy()
	host, port, err := net.SplitHostPort(proxy.Addr())
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	cfg.ConnConfig.Host, cfg.ConnConfig.Port = host, uint16(p)
	cfg.ConnConfig.Fallbacks = nil
	cfg.MaxConns = 16
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, proxy
}

// runRuntime runs rt until the test ends.
func runRuntime(t testing.TB, rt *core.Runtime) {
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { defer close(stopped); rt.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-stopped })
}

// promptRetry retries a failed job at once, so that the suite's retry
// cases stay short.
type promptRetry struct{}

func (promptRetry) NextRetry(*rivertype.JobRow) time.Time {
	return time.Now().Add(10 * time.Millisecond)
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
