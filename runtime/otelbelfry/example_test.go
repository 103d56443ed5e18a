package otelbelfry_test

import (
	"context"
	"log"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
	"github.com/belfry/belfry/runtime/otelbelfry"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Tracing a service: the Tracer observes the runtime's enqueues and wraps
// the workers' handlers, so each attempt's span links to the enqueue that
// made its task.
func Example() {
	// The service's own provider, with its exporter (OTLP, stdout, ...).
	tp := sdktrace.NewTracerProvider()
	otel.SetTracerProvider(tp)
	defer tp.Shutdown(context.Background())

	reg := registry.MustNew(registry.Schedule{Name: "prune", Expr: "17 3 * * *",
		Handler: func(ctx context.Context, occ registry.Occurrence) error {
			// ctx carries the attempt's span: spans started here are its children.
			return nil
		}})
	tracing := otelbelfry.New(otelbelfry.Config{}) // otel's global provider
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	rt, err := runtime.New(reg, runtime.Options{Redis: rdb, EnqueueObserver: tracing})
	if err != nil {
		log.Fatal(err)
	}
	mux := asynq.NewServeMux()
	rt.RegisterHandlers(mux, tracing.Middleware())
	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{})
	if err := srv.Start(mux); err != nil {
		log.Fatal(err)
	}
	defer srv.Shutdown()
	rt.Run(context.Background())
}
