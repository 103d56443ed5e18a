package runtime

import (
	"cmp"
	"fmt"
	"log/slog"
	"time"

	"github.com/belfry/belfry/runtime/core"
	"github.com/belfry/belfry/runtime/engine"
	"github.com/belfry/belfry/runtime/internal/pipeline"
	"github.com/belfry/belfry/runtime/internal/redisengine"
	"github.com/redis/go-redis/v9"
)

// ReplicaAckTimeoutDefault is Options.ReplicaAckTimeout's default.
const ReplicaAckTimeoutDefault = redisengine.AckTimeoutDefault

// ReplicaAcksOff, as Options.ReplicaAcks, has the leader's writes wait for
// no replica, even on a failover or cluster client, where they wait for
// one by default: a failover may then lose what the leader counted as
// done (see docs/redis.md).
const ReplicaAcksOff = -1

// replicaAcksOnFailover is ReplicaAcks's default on a client whose primary
// changes in a failover.
const replicaAcksOnFailover = 1

// Options configure a Runtime: core.Options and the Redis engine's own
// settings (Redis, RedisURL, ReplicaAcks, ReplicaAckTimeout). The zero
// value of every field means its default; with none of Engine, Redis and
// RedisURL set the scheduler is disabled (the runtime still answers
// questions about schedules).
type Options struct {
	// Engine stores the runtime's state, queues its tasks and elects its
	// leader; RedisEngine(client) is the Redis/asynq engine, configured
	// from these Options. Another engine is built for this Namespace and
	// Replica by its own package, and runs without the Redis engine's
	// compensations (see package engine). Set Engine, Redis or RedisURL,
	// not more than one.
	Engine engine.Engine
	// Redis is a client shared with the rest of the service. The runtime
	// never closes it.
	Redis redis.UniversalClient
	// RedisURL ("redis://host:6379/0", "rediss://host:6380/0" for TLS,
	// "unix:///path/redis.sock") is used when Redis is nil; the runtime
	// then owns and closes the client. A master_name parameter makes it a
	// Sentinel URL: the host (and each addr parameter) is a sentinel, and
	// the client follows the primary through failovers
	// ("redis://sentinel1:26379?master_name=mymaster&addr=sentinel2:26379").
	RedisURL string
	// The fields below, to EnqueueConcurrency, and EnqueueObserver are
	// core.Options', documented there; New passes them on as they are.
	Logger             *slog.Logger
	Namespace          string
	Replica            string
	LeaseTTL           time.Duration
	Grace              time.Duration
	SkewMargin         time.Duration
	HistoryLimit       int
	EnqueueConcurrency int
	// ReplicaAcks, when above zero, makes the leader's writes — lease
	// acquire and renewal, each enqueue, the cursor and ledger commits —
	// count only once that many replicas acknowledge them (Redis WAIT, on
	// the connection that wrote), so a failover to an acknowledging replica
	// cannot lose an occurrence the leader counted as enqueued. A write not
	// acknowledged within ReplicaAckTimeout counts as failed: an enqueue is
	// tried again (its task ID makes that safe; one whose task a failover
	// lost meanwhile, before any attempt of it started, is enqueued again
	// under the same ID), a renewal makes the holder step down.
	//
	// The default (0) depends on the client: on a Sentinel failover client
	// (redis.NewFailoverClient, a UniversalClient with a MasterName, a
	// RedisURL with master_name) or a cluster client, whose primary
	// changes, it is 1; on a client of a single server, none.
	// ReplicaAcksOff waits for no replica on any client. While fewer
	// replicas are connected to the primary than the writes wait for, the
	// runtime does not lead, and says why in the log, health and status. The operator's writes (Pause, Resume, member
	// changes, manual runs) wait too, and return ErrNotAcked when too few
	// replicas answer: Redis ran them, but a failover may undo them. The
	// workers of a runtime with ReplicaAcks (RegisterHandlers) mark each
	// attempt's start in its task and wait for the acknowledgement before
	// the handler runs, so a failover that loses a worker's dequeue does
	// not run the attempt a second time; call Close after the workers'
	// Shutdown. Each write then
	// costs a round trip to a replica more, and scheduling stops while
	// fewer replicas answer. See docs/redis.md.
	ReplicaAcks int
	// ReplicaAckTimeout bounds each wait for ReplicaAcks; default 1s (or
	// LeaseTTL/5 if that is shorter), and below LeaseTTL/3, a lease call's
	// bound. The client's ReadTimeout need not cover it: go-redis extends
	// its deadline for WAIT.
	ReplicaAckTimeout time.Duration
	// EnqueueObserver is core.Options.EnqueueObserver; otelbelfry.New
	// returns one that traces enqueues.
	EnqueueObserver EnqueueObserver
}

// core is the engine-neutral part of o, with eng as its Engine.
func (o *Options) core(eng engine.Engine) core.Options {
	return core.Options{Engine: eng, Logger: o.Logger, Namespace: o.Namespace, Replica: o.Replica, LeaseTTL: o.LeaseTTL,
		Grace: o.Grace, SkewMargin: o.SkewMargin, HistoryLimit: o.HistoryLimit, EnqueueConcurrency: o.EnqueueConcurrency,
		EnqueueObserver: o.EnqueueObserver}
}

// acks checks ReplicaAcks and ReplicaAckTimeout and returns what the
// leader's writes wait for on client (nil: not known yet, as when the
// options are checked before a client is made).
func (o *Options) acks(client redis.UniversalClient) (pipeline.Acks, error) {
	replicas := o.ReplicaAcks
	switch {
	case replicas < ReplicaAcksOff:
		return pipeline.Acks{}, fmt.Errorf("ReplicaAcks must be the number of replicas to wait for, 0 (the default: 1 on a Sentinel or cluster client, else none) "+
			"or runtime.ReplicaAcksOff (-1: none); got %d", replicas)
	case replicas == 0 && redisengine.FailsOver(client):
		replicas = replicaAcksOnFailover
	}
	if replicas <= 0 {
		return pipeline.Acks{}, nil
	}
	leaseTTL := cmp.Or(o.LeaseTTL, LeaseTTLDefault)
	timeout := cmp.Or(o.ReplicaAckTimeout, min(ReplicaAckTimeoutDefault, leaseTTL/5))
	if timeout < time.Millisecond || timeout >= leaseTTL/3 {
		return pipeline.Acks{}, fmt.Errorf("ReplicaAckTimeout must be at least 1ms and below LeaseTTL/3 (%s); got %s", leaseTTL/3, timeout)
	}
	return pipeline.Acks{Replicas: replicas, Timeout: timeout}, nil
}
