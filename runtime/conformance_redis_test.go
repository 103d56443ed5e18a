package runtime_test

import (
	"testing"
	"time"

	"github.com/belfry/belfry/internal/redistest"
	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
	"github.com/belfry/belfry/runtime/core"
	"github.com/belfry/belfry/runtime/enginetest"
	"github.com/belfry/belfry/runtime/internal/redisengine"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// The Redis engine passes the conformance suite every engine runs, built
// as a service builds it: runtime.New with Options.Redis, its workers
// wired by RegisterHandlers. (TestOptionsEngineSchedulesAsOptionsRedisDoes
// runs it given to core.New as runtime.RedisEngine, more briefly: the
// suite twice would double its wall time for a path that differs only in
// how the engine is configured.)
func TestConformance(t *testing.T) {
	t.Parallel()
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

var _ enginetest.Builder = redisBackend{}

func (b redisBackend) Replica(t testing.TB) (core.Options, enginetest.Link) {
	proxy := redistest.NewProxy(t, "tcp", sharedRedisAddr())
	return core.Options{Engine: runtime.RedisEngine(proxy.Client(t, redis.Options{})), Namespace: b.namespace}, proxy
}

// New builds each replica with runtime.New, on the client of the
// RedisEngine Replica gave, as Options.Redis (enginetest.Builder).
func (redisBackend) New(reg *registry.Registry, opts core.Options) (*core.Runtime, error) {
	ropts := runtime.Options{Redis: opts.Engine.(*redisengine.Pending).Client}
	copyCoreOptions(&ropts, opts)
	rt, err := runtime.New(reg, ropts)
	if err != nil {
		return nil, err
	}
	return rt.Runtime, nil
}

func (b redisBackend) StartWorkers(t testing.TB, rt *core.Runtime) {
	startWorkersOn(t, sharedRedis(t), rt)
}

// startWorkersOn runs asynq workers of rt's queues on rdb until t ends.
func startWorkersOn(t testing.TB, rdb redis.UniversalClient, rt *core.Runtime) {
	queues := map[string]int{}
	for _, s := range rt.Registry().Schedules() {
		queues[s.Queue] = 1
	}
	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{
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

// The Redis engine passes the conformance suite on a Redis Cluster too,
// every replica on a cluster client whose connections go through proxies
// of its own (its Link), the workers on a direct cluster client.
func TestConformanceOnRedisCluster(t *testing.T) {
	t.Parallel()
	// Masters with a replica each: the runtime's writes wait for one
	// replica's acknowledgement on a cluster client by default.
	enginetest.Run(t, clusterHarness{redistest.StartClusterWithReplicas(t, 3, 1)})
}

type clusterHarness struct{ cluster *redistest.Cluster }

func (h clusterHarness) NewBackend(t testing.TB) enginetest.Backend {
	return clusterBackend{redisBackend: redisBackend{namespace: uniq("conformance")}, cluster: h.cluster}
}

// clusterBackend builds replicas as redisBackend does, on the cluster.
type clusterBackend struct {
	redisBackend
	cluster *redistest.Cluster
}

func (b clusterBackend) Replica(t testing.TB) (core.Options, enginetest.Link) {
	client, link := b.cluster.LinkedClient(t)
	return core.Options{Engine: runtime.RedisEngine(client), Namespace: b.namespace}, link
}

func (b clusterBackend) StartWorkers(t testing.TB, rt *core.Runtime) {
	startWorkersOn(t, b.cluster.Client(t), rt)
}
