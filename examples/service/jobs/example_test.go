package jobs_test

import (
	"context"
	"log"
	"log/slog"

	"github.com/belfry/belfry/examples/service/jobs"
	"github.com/belfry/belfry/runtime"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// A service builds the registry with its dependencies, hands it to the
// runtime, registers the handlers on its asynq server, and runs the
// scheduler on every replica. It needs Redis, so the example only
// compiles.
func ExampleNewRegistry() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()

	reg := jobs.NewRegistry(&jobs.Jobs{DB: jobs.NewDB()})
	rt, err := runtime.New(reg, runtime.Options{Redis: rdb, Logger: slog.Default()})
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close()

	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{Queues: map[string]int{"default": 3, "maintenance": 1}})
	mux := asynq.NewServeMux()
	rt.RegisterHandlers(mux)
	if err := srv.Start(mux); err != nil {
		log.Fatal(err)
	}
	defer srv.Shutdown()

	if err := rt.Run(context.Background()); err != nil {
		log.Print(err)
	}
}
