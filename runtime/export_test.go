package runtime

import (
	"context"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/internal/clock"
	"github.com/belfry/belfry/runtime/internal/corehook"
	"github.com/belfry/belfry/runtime/internal/pipeline"
	"github.com/belfry/belfry/runtime/internal/redisengine"
	"github.com/belfry/belfry/runtime/internal/store"
	"github.com/redis/go-redis/v9"
)

// Hooks for tests that play a skewed, stalled or zombie replica, which a
// running Runtime never does on purpose. Those that reach the core's
// internals go through corehook.TestKnobs.

// NewWithClock is New on another clock: the chaos harness skews replicas
// with clock.Offset.
func NewWithClock(reg *registry.Registry, opts Options, clk clock.Clock) (*Runtime, error) {
	return newRuntime(reg, opts, clk)
}

func (r *Runtime) hooks() corehook.TestKnobs { return corehook.TestKnobsOf(r.Runtime) }

// LapseTrust ends the holder's trust window now, as a stall (GC pause,
// SIGSTOP) that outlasts it does, while its key lives on in Redis.
func (r *Runtime) LapseTrust() { r.redis.LapseTrust() }

// RenewLease renews now, as the stalled holder does when it wakes.
func (r *Runtime) RenewLease(ctx context.Context) error {
	_, err := r.redis.Renew(ctx)
	return err
}

// Scheduling reports whether the scheduling loop holds leader state.
func (r *Runtime) Scheduling() bool { return r.hooks().Scheduling() }

// Enqueue enqueues a scheduled occurrence as the scheduler does, without
// any lease check: what a zombie that slipped past its check would do.
func (r *Runtime) Enqueue(ctx context.Context, occ registry.Occurrence) error {
	return r.hooks().Enqueue(ctx, occ)
}

// EnqueueAsHolder enqueues a scheduled occurrence as the scheduler does,
// fenced by leaseValue, but without its own check of the lease first: what
// a zombie whose write was delayed past a takeover sends.
func (r *Runtime) EnqueueAsHolder(ctx context.Context, leaseValue string, occ registry.Occurrence) error {
	fence := &pipeline.Fence{Namespace: r.redis.Namespace(), Key: r.redis.Keys.Lease, Value: leaseValue}
	err := r.hooks().Enqueue(pipeline.WithFence(ctx, fence), occ)
	if fence.Rejected() {
		return store.ErrNotLeader
	}
	return err
}

// RedisClient is the client the runtime uses, shared or its own.
func (r *Runtime) RedisClient() redis.UniversalClient { return r.redis.Client }

// JudgeRedisSettingsEvery makes the runtime judge Redis's settings again
// after d instead of a minute.
func (r *Runtime) JudgeRedisSettingsEvery(d time.Duration) { r.hooks().JudgeSettingsEvery(d) }

// NoteRedis tells the runtime a Redis call's outcome, as its loops do.
func (r *Runtime) NoteRedis(err error) { r.hooks().NoteEngine(err) }

// JudgeRedis is the verdict on an INFO reply.
var JudgeRedis = redisengine.JudgeSettings

// JudgeReplicas is the verdict on an INFO reply for writes that wait for
// that many replicas.
var JudgeReplicas = redisengine.JudgeReplicas

// KnowsEpoch reports whether the replica has learned the store's epoch.
func (r *Runtime) KnowsEpoch() bool { return r.redis.KnowsEpoch() }

// SeenToken is the highest fencing token the replica has seen.
func (r *Runtime) SeenToken() int64 { return r.redis.SeenToken() }

// LookForOldNamespaceEvery makes the runtime look for an earlier deployment
// in the old default namespace at every namespace check (d 0) or every d,
// instead of once a minute.
func (r *Runtime) LookForOldNamespaceEvery(d time.Duration) { r.hooks().LookForOldNamespaceEvery(d) }

// NamespaceChecks counts the namespace checks that reached Redis.
func (r *Runtime) NamespaceChecks() int { return r.hooks().NamespaceChecks() }

// CheckQueuesEvery makes the leader look at its queues (unserved, misrouted
// occurrences) every d instead of once a minute.
func (r *Runtime) CheckQueuesEvery(d time.Duration) { r.hooks().CheckQueuesEvery(d) }

// LoopSignals are the leader loop's test signals (core's leaderloop.go),
// each off until a test turns it on with Init before Run. A test turns on
// only those it receives (or drains): a signal left on and unreceived
// fills its buffer and fails the test.
type LoopSignals = corehook.LoopSignals

// LoopSignals are the leader loop's signals, for a test to turn on.
func (r *Runtime) LoopSignals() LoopSignals { return r.hooks().LoopSignals() }
