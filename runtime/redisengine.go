package runtime

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"reflect"
	"sync/atomic"

	"github.com/belfry/belfry/runtime/engine"
	"github.com/belfry/belfry/runtime/internal/clock"
	"github.com/belfry/belfry/runtime/internal/pipeline"
	"github.com/belfry/belfry/runtime/internal/redisengine"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
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
// serves that one runtime: New refuses it a second time, and refuses it
// inside another engine (a wrapper), where New cannot configure it. Until
// New has it, every call of it that would reach Redis fails with an error
// saying so. A nil rdb gives an engine New refuses.
func RedisEngine(rdb redis.UniversalClient) engine.Engine {
	return &pendingRedis{Engine: unconfiguredRedis(), client: rdb}
}

// errUnconfiguredRedis is what a runtime.RedisEngine answers to a call
// made on it rather than through the runtime New built from it.
var errUnconfiguredRedis = errors.New("runtime.RedisEngine must be passed to runtime.New before use")

// pendingRedis is a Redis engine not yet configured: New builds the
// runtime's engine from its client with the runtime's options. Its
// methods are those of engine.Engine only so that it can be passed as one.
type pendingRedis struct {
	// Engine answers the calls made on the pendingRedis itself: a Redis
	// engine on a client that sends nothing (see unconfiguredRedis).
	engine.Engine
	client redis.UniversalClient
	// taken is set by the New it serves, once every check has passed, so
	// that of two News given it at once one serves and the other refuses.
	taken atomic.Bool
}

// refuseCommands is a redis.Limiter that admits no command: each fails
// with err before it reaches a connection.
type refuseCommands struct{ err error }

func (l refuseCommands) Allow() error     { return l.err }
func (refuseCommands) ReportResult(error) {}

// unconfiguredRedis is a Redis engine whose every call that reaches Redis
// fails with errUnconfiguredRedis, and whose client connects nowhere, nor
// starts anything, so that one never passed to New costs nothing.
func unconfiguredRedis() engine.Engine {
	refuse := func(context.Context, string, string) (net.Conn, error) { return nil, errUnconfiguredRedis }
	client := redis.NewClient(&redis.Options{Dialer: refuse, Limiter: refuseCommands{errUnconfiguredRedis},
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}})
	return redisengine.New(redisengine.Config{Client: client, HistoryLimit: HistoryLimitDefault, LeaseTTL: LeaseTTLDefault})
}

var (
	engineType      = reflect.TypeFor[engine.Engine]()
	pendingRedisPtr = reflect.TypeFor[*pendingRedis]()
)

// maxWrapDepth bounds how deep wrapsRedisEngine looks: an engine inside
// an engine, each in a field of the other.
const maxWrapDepth = 8

// wrapsRedisEngine reports whether v holds a runtime.RedisEngine in a
// field whose type is an engine, embedded or named, through wrappers of
// wrappers: an engine that instruments another holds it so. Only fields
// typed as engines are read, which their wrapper set when it was built.
func wrapsRedisEngine(v reflect.Value, depth int) bool {
	if depth > maxWrapDepth {
		return false
	}
	switch v.Kind() {
	case reflect.Interface, reflect.Pointer:
		if v.IsNil() {
			return false
		}
		if v.Type() == pendingRedisPtr {
			return true
		}
		return wrapsRedisEngine(v.Elem(), depth+1)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).Type.Implements(engineType) && wrapsRedisEngine(v.Field(i), depth+1) {
				return true
			}
		}
	}
	return false
}

// useEngine sets up the engine Options name: Engine, Redis or RedisURL,
// or none (scheduling disabled).
func (r *Runtime) useEngine(clk clock.Clock) error {
	opts := &r.opts
	var rdb redis.UniversalClient
	var pending *pendingRedis // the runtime.RedisEngine this runtime is to take
	switch {
	case opts.Engine != nil && (opts.Redis != nil || opts.RedisURL != ""):
		return errors.New("Options.Engine and Options.Redis or RedisURL are set: set exactly one of them")
	case opts.Engine != nil:
		var ok bool
		pending, ok = opts.Engine.(*pendingRedis)
		switch {
		case !ok && wrapsRedisEngine(reflect.ValueOf(opts.Engine), 0):
			return fmt.Errorf("Options.Engine: %T holds a runtime.RedisEngine, which New configures only when given it itself; pass the runtime.RedisEngine as Options.Engine", opts.Engine)
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
		}
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
		if pending != nil {
			which = "the client of runtime.RedisEngine"
		}
		return fmt.Errorf("%w: %s is a *redis.ClusterClient; %s", ErrRedisCluster, which, redisengine.ClusterAdvice)
	}
	// Taken last: a RedisEngine refused above stays free for a New with
	// the fault corrected.
	if pending != nil && !pending.taken.CompareAndSwap(false, true) {
		return errors.New("Options.Engine: this runtime.RedisEngine already serves another runtime; make one per runtime")
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
