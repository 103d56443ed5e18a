package runtime_test

import (
	"testing"
	"time"

	"github.com/belfry/belfry/runtime"
	"github.com/belfry/belfry/runtime/core"
	"github.com/belfry/belfry/runtime/enginetest"
	"github.com/belfry/belfry/runtime/internal/redistest"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// The Redis engine passes the conformance suite every engine runs, given
// to core.New as runtime.RedisEngine, its workers wired by
// RegisterHandlers (runtime.FromCore).
func TestConformance(t *testing.T) {
	enginetest.Run(t, redisHarness{})
}

// redisHarness gives each case a namespace of its own on the shared test
// Redis, each replica a proxy of its own in front of it, and asynq
// workers on a direct client.
type redisHarness struct{}

func (redisHarness) NewBackend(t testing.TB) enginetest.Backend {
	return redisBackend{namespace: uniq("conformance")}
}

type redisBackend struct{ namespace string }

func (b redisBackend) Replica(t testing.TB) (core.Options, enginetest.Link) {
	proxy := redistest.NewProxy(t, "tcp", sharedRedisAddr())
	return core.Options{Engine: runtime.RedisEngine(proxy.Client(t, redis.Options{})), Namespace: b.namespace}, proxy
}

func (b redisBackend) StartWorkers(t testing.TB, rt *core.Runtime) {
	queues := map[string]int{}
	for _, s := range rt.Registry().Schedules() {
		queues[s.Queue] = 1
	}
	srv := asynq.NewServerFromRedisClient(sharedRedis(t), asynq.Config{
		Queues: queues, Concurrency: 8, Logger: quietAsynq{}, LogLevel: asynq.FatalLevel,
		TaskCheckInterval: 20 * time.Millisecond, DelayedTaskCheckInterval: 50 * time.Millisecond,
		RetryDelayFunc:  func(int, error, *asynq.Task) time.Duration { return time.Millisecond },
		ShutdownTimeout: 5 * time.Second,
	})
	mux := asynq.NewServeMux()
	runtime.FromCore(rt).RegisterHandlers(mux)
	if err := srv.Start(mux); err != nil {
		t.Fatalf("starting asynq server: %v", err)
	}
	t.Cleanup(srv.Shutdown)
}
