package postgres_test

import (
	"context"
	"log"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/admin"
	"github.com/belfry/belfry/runtime/core"
	"github.com/belfry/belfry/runtime/metrics"
	"github.com/belfry/belfry/runtime/postgres"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
)

// A service on Postgres and River, as docs/postgres.md wires it: the
// schema migrated beforehand (belfry migrate --postgres URL), the engine
// configured by core.New, River's workers running the handlers, the admin,
// metrics and health mounted.
func Example() {
	ctx := context.Background()
	reg := registry.MustNew(registry.Schedule{Name: "nightly-report", Expr: "0 2 * * *",
		Handler: func(context.Context, registry.Occurrence) error { return nil }})

	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	if err := postgres.CheckSchema(ctx, pool); err != nil {
		log.Fatal(err) // names belfry migrate --postgres URL
	}
	eng, err := postgres.New(postgres.Config{Pool: pool})
	if err != nil {
		log.Fatal(err)
	}
	rt, err := core.New(reg, core.Options{Engine: eng, Logger: slog.Default()})
	if err != nil {
		log.Fatal(err)
	}

	workers := river.NewWorkers()
	if err := postgres.AddWorkers(workers, rt); err != nil {
		log.Fatal(err)
	}
	queues := map[string]river.QueueConfig{}
	for _, s := range rt.Registry().Schedules() {
		queues[s.Queue] = river.QueueConfig{MaxWorkers: 10}
	}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Queues: queues, Workers: workers})
	if err != nil {
		log.Fatal(err)
	}
	if err := client.Start(context.WithoutCancel(ctx)); err != nil {
		log.Fatal(err)
	}

	metricsHandler := metrics.Handler(rt)
	mux := http.NewServeMux()
	mux.Handle("/cron/", http.StripPrefix("/cron", admin.New(rt, admin.Options{Metrics: metricsHandler})))
	mux.Handle("GET /metrics", metricsHandler)
	mux.Handle("GET /healthz", rt.HealthHandler())
	mux.Handle("GET /livez", rt.LivezHandler())
	go http.ListenAndServe("127.0.0.1:8080", mux)

	if err := rt.Run(ctx); err != nil { // until ctx ends; releases the lease as it returns
		log.Print(err)
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client.Stop(stopCtx) // then let running occurrences finish
}
