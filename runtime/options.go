package runtime

import (
	"cmp"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Defaults for Options.
const (
	NamespaceDefault          = "belfry"
	LeaseTTLDefault           = 15 * time.Second
	SkewMarginDefault         = time.Minute
	HistoryLimitDefault       = 50
	EnqueueConcurrencyDefault = 256
)

// Options configure a Runtime. The zero value of every field means its
// default; with neither Redis nor RedisURL set the scheduler is disabled
// (the runtime still answers questions about schedules).
type Options struct {
	// Redis is a client shared with the rest of the service. The runtime
	// never closes it.
	Redis redis.UniversalClient
	// RedisURL ("redis://host:6379/0", "unix:///path/redis.sock") is used
	// when Redis is nil; the runtime then owns and closes the client.
	RedisURL string
	Logger   *slog.Logger
	// Namespace prefixes every key the runtime writes, so several services
	// can share one Redis.
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
	// most 20 (each record costs Redis about half a kilobyte).
	HistoryLimit int
	// EnqueueConcurrency bounds the concurrent enqueues when many schedules
	// come due together (the midnight spike). Enqueues made at the same
	// moment share pipelines, so this is also the largest batch, and the
	// enqueues themselves need no more Redis connections for it. The check
	// an overlap=skip schedule makes before its enqueue does use a
	// connection of the client's pool.
	EnqueueConcurrency int
}

var replicaRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$`)

func (o *Options) normalize() error {
	o.Namespace = cmp.Or(o.Namespace, NamespaceDefault)
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
