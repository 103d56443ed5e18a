package runtime

import (
	"cmp"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strconv"
	"time"

	"github.com/belfry/belfry/runtime/engine"
	"github.com/redis/go-redis/v9"
)

// Defaults for Options.
const (
	LeaseTTLDefault           = 15 * time.Second
	SkewMarginDefault         = time.Minute
	HistoryLimitDefault       = 50
	EnqueueConcurrencyDefault = 256
	ReplicaAckTimeoutDefault  = time.Second
)

// Options configure a Runtime. The zero value of every field means its
// default; with none of Engine, Redis and RedisURL set the scheduler is
// disabled (the runtime still answers questions about schedules).
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
	Logger   *slog.Logger
	// Namespace prefixes every key the runtime writes and every occurrence
	// ID, so several services can share one Redis. The replicas of one
	// service must share it, and two services must not. Default:
	// DefaultNamespace(registry), named after the registry's first package
	// (e.g. "service.jobs-1f0c33a2"), which tells services apart and stays
	// the same when the schedules change. Set it to NamespaceLegacy
	// ("belfry") to keep the namespace of a deployment that began before
	// the default was derived.
	Namespace string
	// Replica names this process in the lease, the ledger and the admin
	// page. Default: hostname-pid.
	Replica string
	// LeaseTTL is how long a lease outlives its holder. Takeover after a
	// crash takes at most this long; each renewal costs one command every
	// LeaseTTL/3.
	LeaseTTL time.Duration
	// Grace, when set, replaces every schedule's own grace window: how late
	// a slot may still be enqueued.
	Grace time.Duration
	// SkewMargin is the largest clock difference expected between replicas
	// and Redis: a replica further off does not lead, and after a loss of
	// Redis data cursors restart this far past Redis's clock.
	SkewMargin time.Duration
	// HistoryLimit is the number of occurrences kept per schedule in the
	// ledger; a schedule that fires more often than once a minute keeps at
	// most 20, so that its records stay within what a per-second schedule
	// may cost Redis (redis_kb_per_1s in BENCHMARKS.md).
	HistoryLimit int
	// EnqueueConcurrency bounds the concurrent enqueues when many schedules
	// come due together (the midnight spike). Enqueues made at the same
	// moment share pipelines, so this is also the largest batch, and the
	// enqueues themselves need no more Redis connections for it. The check
	// an overlap=skip schedule makes before its enqueue does use a
	// connection of the client's pool.
	EnqueueConcurrency int
	// ReplicaAcks, when above zero, makes the leader's writes — lease
	// acquire and renewal, each enqueue, the cursor and ledger commits —
	// count only once that many replicas acknowledge them (Redis WAIT, on
	// the connection that wrote), so a failover to an acknowledging replica
	// cannot lose an occurrence the leader counted as enqueued. A write not
	// acknowledged within ReplicaAckTimeout counts as failed: an enqueue is
	// tried again (its task ID makes that safe; one whose task a failover
	// lost meanwhile is recorded lost, not run again), a renewal makes the
	// holder step down. The operator's writes (Pause, Resume, member
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
	// EnqueueObserver, when set, is told of every enqueue of an occurrence
	// before and after it, and what it returns travels with the task (see
	// EnqueueObserver); otelbelfry.New returns one that traces enqueues.
	// nil, the default, adds nothing to the enqueue path.
	EnqueueObserver EnqueueObserver
}

var replicaRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$`)

func (o *Options) normalize() error {
	o.LeaseTTL = cmp.Or(o.LeaseTTL, LeaseTTLDefault)
	o.SkewMargin = cmp.Or(o.SkewMargin, SkewMarginDefault)
	o.HistoryLimit = cmp.Or(o.HistoryLimit, HistoryLimitDefault)
	o.EnqueueConcurrency = cmp.Or(o.EnqueueConcurrency, EnqueueConcurrencyDefault)
	if o.ReplicaAcks > 0 {
		o.ReplicaAckTimeout = cmp.Or(o.ReplicaAckTimeout, min(ReplicaAckTimeoutDefault, o.LeaseTTL/5))
	}
	if o.Replica == "" {
		host, _ := os.Hostname()
		o.Replica = cmp.Or(host, "replica") + "-" + strconv.Itoa(os.Getpid())
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	switch {
	case o.LeaseTTL < time.Second:
		return fmt.Errorf("LeaseTTL must be at least 1s; got %s", o.LeaseTTL)
	case o.Grace < 0:
		return fmt.Errorf("Grace must be positive (or zero for each schedule's own); got %s", o.Grace)
	case o.Grace > 0 && o.Grace < time.Second:
		return fmt.Errorf("Grace must be at least 1s; got %s", o.Grace)
	case o.SkewMargin < 0:
		return fmt.Errorf("SkewMargin must be positive; got %s", o.SkewMargin)
	case o.HistoryLimit < 1 || o.HistoryLimit > 10000:
		return fmt.Errorf("HistoryLimit must be between 1 and 10000; got %d", o.HistoryLimit)
	case o.EnqueueConcurrency < 1 || o.EnqueueConcurrency > 4096:
		return fmt.Errorf("EnqueueConcurrency must be between 1 and 4096; got %d", o.EnqueueConcurrency)
	case o.ReplicaAcks < 0:
		return fmt.Errorf("ReplicaAcks must be 0 (no wait) or the number of replicas to wait for; got %d", o.ReplicaAcks)
	case o.ReplicaAcks > 0 && (o.ReplicaAckTimeout < time.Millisecond || o.ReplicaAckTimeout >= o.LeaseTTL/3):
		return fmt.Errorf("ReplicaAckTimeout must be at least 1ms and below LeaseTTL/3 (%s); got %s", o.LeaseTTL/3, o.ReplicaAckTimeout)
	case !replicaRE.MatchString(o.Replica):
		return fmt.Errorf("Replica %q: want letters, digits and . _ : @ -, at most 128", o.Replica)
	case !replicaRE.MatchString(o.Namespace):
		return fmt.Errorf("Namespace %q: want letters, digits and . _ : @ -", o.Namespace)
	}
	return nil
}
