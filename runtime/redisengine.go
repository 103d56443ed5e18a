package runtime

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/belfry/belfry/runtime/engine"
	"github.com/belfry/belfry/runtime/internal/redisengine"
	"github.com/redis/go-redis/v9"
)

// MinRedisVersion is the oldest Redis the runtime leads on: asynq's scripts
// need 6.2.
const MinRedisVersion = redisengine.MinVersion

// ErrUnsafeRedis: Redis could lose the runtime's state without a failure
// (it evicts keys) or is too old; the runtime does not lead on it.
var ErrUnsafeRedis = redisengine.ErrUnsafe

// ErrRedisCluster: the runtime was given a Redis Cluster through a client
// that does not speak cluster — a plain client of a cluster node, or a
// Redis that answers as one (CROSSSLOT, MOVED, ASK: a proxy in front of a
// cluster). It is a configuration error, not an outage: the runtime does
// not lead, and health, api/status and the metrics say why. It is
// engine.ErrRefused. A cluster client (*redis.ClusterClient, or
// redis.NewUniversalClient with several addresses) runs on a cluster; see
// docs/redis-cluster.md.
var ErrRedisCluster = redisengine.ErrCluster

// RedisEngine returns the Redis/asynq engine on rdb, for Options.Engine:
// runtime.New(reg, runtime.Options{Engine: runtime.RedisEngine(rdb)}) runs
// as Options{Redis: rdb} does, and so does core.New with it as
// core.Options.Engine, with the replica acks its client gets by default
// (see Options.ReplicaAcks; choosing otherwise takes runtime.Options) and
// with asynq's workers wired through FromCore. The engine is configured by the
// New it is given to (namespace, replica, lease TTL, history, replica
// acks; engine.Configurable), and serves that one runtime. Either New
// refuses it a second time or on a nil rdb, and inside another engine (a
// wrapper), where New cannot configure it. Until New has it, every call of it that would reach
// Redis fails with an error saying so.
func RedisEngine(rdb redis.UniversalClient) engine.Engine {
	return redisengine.NewPending(rdb)
}

// redisSetup is the Redis engine Options name (Engine as a RedisEngine,
// Redis or RedisURL), for core.New to configure, which checks its client
// (redisengine.Setup); nil for another engine or none. ownsClient says the
// runtime made the client (RedisURL).
func (o *Options) redisSetup() (setup *redisengine.Setup, ownsClient bool, err error) {
	if _, err := o.acks(nil); err != nil {
		return nil, false, err // before a RedisURL's client is made
	}
	var pending *redisengine.Pending // the runtime.RedisEngine this runtime is to take
	switch {
	case o.Engine != nil && (o.Redis != nil || o.RedisURL != ""):
		return nil, false, errors.New("Options.Engine and Options.Redis or RedisURL are set: set exactly one of them")
	case o.Engine != nil:
		var ok bool
		if pending, ok = o.Engine.(*redisengine.Pending); !ok {
			// Another engine: core takes it as it is.
			return nil, false, nil
		}
	case o.Redis != nil:
		pending = redisengine.NewPending(o.Redis)
	case o.RedisURL != "":
		c, err := openRedisURL(o.RedisURL)
		if err != nil {
			return nil, false, redisURLError(o.RedisURL, err)
		}
		pending, ownsClient = redisengine.NewPending(c), true
	default:
		return nil, false, nil
	}
	acks, err := o.acks(pending.Client)
	if err != nil {
		if ownsClient {
			pending.Client.Close()
		}
		return nil, false, err
	}
	return &redisengine.Setup{Pending: pending, Acks: acks, URL: o.RedisURL}, ownsClient, nil
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
			// The runtime bounds its calls with contexts (see core's
			// bounded reads).
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

// redisURLError explains why RedisURL does not parse without quoting any
// part of its credentials: the parser's own message may quote a fragment
// of a password (`invalid port ":hunt" after host` for a password with a
// '/'), so the URL is parsed again without its userinfo, and if that
// parses, the fault is in the userinfo.
func redisURLError(rawURL string, err error) error {
	const want = "want e.g. redis://user:password@127.0.0.1:6379/0"
	scheme, rest, ok := strings.Cut(rawURL, "://")
	at := strings.LastIndexByte(rest, '@')
	if !ok || at < 0 {
		return fmt.Errorf("RedisURL: %v; %s", redisengine.RedactSecrets(err.Error(), rawURL), want)
	}
	if _, _, err := parseRedisURL(scheme + "://" + rest[at+1:]); err != nil {
		return fmt.Errorf("RedisURL: %v; %s", redisengine.RedactSecrets(err.Error(), rawURL), want)
	}
	return fmt.Errorf("RedisURL: the user or password is not valid in a URL (not shown); percent-encode '/', '@', ':' and '%%' in them (a '/' is %%2F); %s", want)
}
