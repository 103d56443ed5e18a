package core

import (
	"cmp"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strconv"
	"time"

	"github.com/belfry/belfry/runtime/engine"
)

// Defaults for Options.
const (
	LeaseTTLDefault           = 15 * time.Second
	SkewMarginDefault         = time.Minute
	HistoryLimitDefault       = 50
	EnqueueConcurrencyDefault = 256
)

// Options configure a Runtime. The zero value of every field means its
// default; with no Engine the scheduler is disabled (the runtime still
// answers questions about schedules).
type Options struct {
	// Engine stores the runtime's state, queues its tasks and elects its
	// leader. An engine that implements engine.Configurable is configured
	// by New from these Options (namespace, replica, lease TTL, history);
	// another is built for this Namespace and Replica by its own package.
	// nil disables the scheduler.
	Engine engine.Engine
	// Logger receives the runtime's logs; default slog.Default().
	Logger *slog.Logger
	// Namespace prefixes every key the runtime writes and every occurrence
	// ID, so several services can share one store (a Redis, a database). The replicas of one
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
	// and the engine's server: a replica further off does not lead, and
	// after a loss of the server's data cursors restart this far past its
	// clock.
	SkewMargin time.Duration
	// HistoryLimit is the number of occurrences kept per schedule in the
	// ledger; a schedule that fires more often than once a minute keeps at
	// most 20, so that its records stay within what a per-second schedule
	// may cost the store (redis_kb_per_1s in BENCHMARKS.md).
	HistoryLimit int
	// EnqueueConcurrency bounds the concurrent enqueues when many schedules
	// come due together (the midnight spike). Enqueues made at the same
	// moment share pipelines, so this is also the largest batch, and the
	// enqueues themselves need no more connections for it. The check
	// an overlap=skip schedule makes before its enqueue does use a
	// connection of the client's pool.
	EnqueueConcurrency int
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
	case !replicaRE.MatchString(o.Replica):
		return fmt.Errorf("Replica %q: want letters, digits and . _ : @ -, at most 128", o.Replica)
	case !replicaRE.MatchString(o.Namespace):
		return fmt.Errorf("Namespace %q: want letters, digits and . _ : @ -", o.Namespace)
	}
	return nil
}
