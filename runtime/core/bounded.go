package core

import (
	"context"
	"errors"
	"net"

	"github.com/belfry/belfry/runtime/engine"
)

// The runtime's reads (every public read method, and so the admin page,
// the JSON API, health and metrics) return by their caller's deadline,
// whatever client the service gave the runtime. go-redis honours a context deadline only on a client built with
// ContextTimeoutEnabled, which the runtime sets on every client it makes
// (RedisURL); a client from Options.Redis is the service's, shared and
// configured as it chose, so each read runs under engine.Obey instead. A
// read given up on finishes in the background on one pooled connection
// (see Obey), and its result is dropped.
//
// bounded is the one way those reads are bounded: a read of one part of a
// Snapshot or Statuses goes through timedRead, which is bounded plus the
// record of what the part's failure leaves Missing.

// ErrRedisSlow: Redis did not answer one of the runtime's calls within its
// deadline. It is stalled (a long fork, DEBUG SLEEP, a slow disk),
// overloaded, or behind a slow or partitioned link; it may well be up.
// RedisState reports it as RedisSlow, not RedisDown.
var ErrRedisSlow = errors.New("redis did not answer in time")

// bounded runs read and returns by ctx's deadline; a read that did not
// answer in time is an ErrRedisSlow.
func bounded[T any](ctx context.Context, read func(context.Context) (T, error)) (T, error) {
	v, err := engine.Obey(ctx, read)
	if err != nil && isSlow(err) && !errors.Is(err, ErrRedisSlow) {
		err = errors.Join(ErrRedisSlow, err)
	}
	return v, err
}

// isSlow says whether err is a call that ran out of time (a deadline, a
// read timeout) rather than one Redis refused or a connection that failed.
func isSlow(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrRedisSlow) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
