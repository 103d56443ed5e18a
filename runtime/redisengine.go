package runtime

import (
	"errors"
	"fmt"
	"net/url"

	"github.com/belfry/belfry/runtime/engine"
	"github.com/belfry/belfry/runtime/internal/clock"
	"github.com/belfry/belfry/runtime/internal/pipeline"
	"github.com/belfry/belfry/runtime/internal/redisengine"
	"github.com/redis/go-redis/v9"
)

// MinRedisVersion is the oldest Redis the runtime leads on: asynq's scripts
// need 6.2.
const MinRedisVersion = redisengine.MinVersion

// ErrUnsafeRedis: Redis could lose the runtime's state without a failure
// (it evicts keys) or is too old; the runtime does not lead on it.
var ErrUnsafeRedis = redisengine.ErrUnsafe

// ErrRedisCluster: the runtime was given a Redis Cluster — a cluster
// client, a server that is a cluster node, or a Redis that answers as one
// (CROSSSLOT, MOVED, ASK: a proxy in front of a cluster). It is a
// configuration error, not an outage: New refuses a cluster client, and
// otherwise the runtime does not lead and health says why.
var ErrRedisCluster = redisengine.ErrCluster

// redisParts are the Redis engine's own parts, reached only by the files
// that are Redis mechanics (worker wiring, the Redis diagnostics); the
// core reaches the engine through Runtime.eng, and its compensations
// (lost-write epochs, start marks, namespace probing, INFO checks)
// through the optional interfaces of package engine.
type redisParts struct {
	redis      *redisengine.Engine
	ownsClient bool // the runtime made the client (RedisURL) and closes it
}

// RedisEngine returns the Redis/asynq engine on rdb, for Options.Engine:
// runtime.New(reg, runtime.Options{Engine: runtime.RedisEngine(rdb)}) runs
// as Options{Redis: rdb} does. The engine is configured by the New it is
// given to (namespace, replica, lease TTL, history, replica acks), and
// serves that one runtime: New refuses it a second time. A nil rdb gives
// an engine New refuses.
func RedisEngine(rdb redis.UniversalClient) engine.Engine {
	return &pendingRedis{client: rdb}
}

// pendingRedis is a Redis engine not yet configured: New builds the
// engine from it with the runtime's options. Its methods are those of
// engine.Engine only so that it can be passed as one.
type pendingRedis struct {
	engine.Engine // nil: New replaces it before any use
	client        redis.UniversalClient
	taken         bool
}

// useEngine sets up the engine Options name: Engine, Redis or RedisURL,
// or none (scheduling disabled).
func (r *Runtime) useEngine(clk clock.Clock) error {
	opts := &r.opts
	var rdb redis.UniversalClient
	switch {
	case opts.Engine != nil && (opts.Redis != nil || opts.RedisURL != ""):
		return errors.New("Options.Engine and Options.Redis or RedisURL are set: set exactly one of them")
	case opts.Engine != nil:
		pending, ok := opts.Engine.(*pendingRedis)
		switch {
		case !ok:
			// Another engine: what it offers of the optional
			// interfaces (engine.Losses, Starts, Namespaces, Settings,
			// Deliveries) the core type-asserts; the rest stays off.
			r.eng = opts.Engine
			r.deliveries, _ = opts.Engine.(engine.Deliveries)
			r.eng.Watch(r.noteRedis)
			return nil
		case pending.client == nil:
			return errors.New("Options.Engine: runtime.RedisEngine was given a nil client")
		case pending.taken:
			return errors.New("Options.Engine: this runtime.RedisEngine already serves another runtime; make one per runtime")
		}
		pending.taken = true
		rdb = pending.client
	case opts.Redis != nil:
		rdb = opts.Redis
	case opts.RedisURL != "":
		c, err := openRedisURL(opts.RedisURL)
		if err != nil {
			return redisURLError(opts.RedisURL, err)
		}
		rdb, r.ownsClient = c, true
	default:
		r.disabled = "no Redis configured (set Options.Redis or Options.RedisURL)"
		r.deliveries = redisengine.AsynqDeliveries{} // RegisterHandlers still serves asynq's workers
		return nil
	}
	if _, cluster := rdb.(*redis.ClusterClient); cluster {
		which := "Options.Redis"
		if opts.Engine != nil {
			which = "the client of runtime.RedisEngine"
		}
		return fmt.Errorf("%w: %s is a *redis.ClusterClient; %s", ErrRedisCluster, which, redisengine.ClusterAdvice)
	}
	r.redisURL = opts.RedisURL
	r.redis = redisengine.New(redisengine.Config{Client: rdb, Namespace: opts.Namespace,
		HistoryLimit: opts.HistoryLimit, Limits: historyLimits(r.reg, opts.HistoryLimit), RecordTTL: recordTTL,
		Acks: opts.acks(), Replica: opts.Replica, LeaseTTL: opts.LeaseTTL, Log: r.log, Clock: clk,
		MayLead: r.mayLeadInNamespace})
	r.eng, r.deliveries = r.redis, r.redis
	r.eng.Watch(r.noteRedis)
	return nil
}

// closeRedis closes the client the runtime made. asynq's Inspector holds
// nothing but the client it was built on (its Close only says so, as an
// error).
func (r *Runtime) closeRedis() error {
	if r.ownsClient {
		return r.redis.Client.Close()
	}
	return nil
}

// acks is what the leader's writes wait for.
func (o *Options) acks() pipeline.Acks {
	return pipeline.Acks{Replicas: o.ReplicaAcks, Timeout: o.ReplicaAckTimeout}
}

// openRedisURL makes the client of a RedisURL: a Sentinel failover client
// when it names a master (master_name), else a plain one.
func openRedisURL(rawURL string) (*redis.Client, error) {
	failover, plain, err := parseRedisURL(rawURL)
	switch {
	case err != nil:
		return nil, err
	case failover != nil:
		return redis.NewFailoverClient(failover), nil
	}
	return redis.NewClient(plain), nil
}

// parseRedisURL parses a RedisURL as openRedisURL does, without a client.
func parseRedisURL(rawURL string) (*redis.FailoverOptions, *redis.Options, error) {
	if u, err := url.Parse(rawURL); err == nil && u.Query().Has("master_name") {
		fopts, err := redis.ParseFailoverURL(rawURL)
		if err == nil {
			// The runtime bounds its calls with contexts (see bounded).
			fopts.ContextTimeoutEnabled = true
		}
		return fopts, nil, err
	}
	ropts, err := redis.ParseURL(rawURL)
	if err == nil {
		ropts.ContextTimeoutEnabled = true
	}
	return nil, ropts, err
}
