package runtime

import (
	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/core"
	"github.com/belfry/belfry/runtime/internal/clock"
	"github.com/belfry/belfry/runtime/internal/corehook"
	"github.com/belfry/belfry/runtime/internal/knob"
	"github.com/belfry/belfry/runtime/internal/redisengine"
)

// Runtime is a core.Runtime on the Redis/asynq engine: every method of
// core.Runtime, and the Redis engine's own (RegisterHandlers for asynq's
// workers, Redis for its diagnostics). Create one per process with New and
// call Run.
type Runtime struct {
	*core.Runtime
	// redis is the Redis engine the runtime runs on; nil when it runs on
	// another engine or none.
	redis      *redisengine.Engine
	ownsClient bool // the runtime made the client (RedisURL) and closes it
	foreign    foreignOwners
}

// New validates opts and returns a runtime for reg on the engine opts
// name: Redis, RedisURL, Engine, or none (scheduling disabled). It does
// not touch Redis; Run does.
func New(reg *registry.Registry, opts Options) (*Runtime, error) {
	return newRuntime(reg, opts, clock.Real{})
}

func init() { knob.NewWithClock = newRuntime }

// newRuntime is New with the clock that lease, scheduler and ledger share:
// tests place a runtime at another instant, the chaos harness skews it.
func newRuntime(reg *registry.Registry, opts Options, clk clock.Clock) (*Runtime, error) {
	// core's options first, then the engine's: a LeaseTTL out of range is
	// named as such, not as the ReplicaAckTimeout it bounds.
	if err := corehook.Validate(reg, opts.core(nil)); err != nil {
		return nil, err
	}
	setup, ownsClient, err := opts.redisSetup()
	if err != nil {
		return nil, err
	}
	eng := opts.Engine
	if setup != nil {
		eng = setup
	}
	c, err := corehook.NewWithClock(reg, opts.core(eng), clk)
	if err != nil {
		if ownsClient {
			setup.Client.Close()
		}
		return nil, err
	}
	r := &Runtime{Runtime: c.(*core.Runtime), ownsClient: ownsClient}
	switch {
	case setup != nil:
		r.redis = setup.Built
	case eng == nil:
		// asynq's workers may still run the handlers (RegisterHandlers),
		// and their deliveries say which attempt each is.
		corehook.Of(r.Runtime).Disable("no Redis configured (set Options.Redis or Options.RedisURL)", redisengine.AsynqDeliveries{})
	}
	return r, nil
}

// FromCore returns the Redis entry point of rt, a runtime core.New built
// on a RedisEngine: its RegisterHandlers for asynq's workers, with the
// checks for another service's occurrences, and its Redis diagnostics.
// Its Close closes no client. On another engine, the handlers run without
// those checks.
func FromCore(rt *core.Runtime) *Runtime {
	red, _ := corehook.Of(rt).Engine().(*redisengine.Engine)
	return &Runtime{Runtime: rt, redis: red}
}

// Close releases the clients the runtime owns. A shared Options.Redis
// client is left open: closing it is the caller's job. With ReplicaAcks it
// first waits, briefly, for its workers' attempts to record their ends
// (see Options.ReplicaAcks): call it after the asynq server's Shutdown.
func (r *Runtime) Close() error {
	err := r.Runtime.Close()
	if r.ownsClient {
		// asynq's Inspector holds nothing but the client it was built on
		// (its Close only says so, as an error).
		return r.redis.Client.Close()
	}
	return err
}

// RedisDiagnostics report what the Redis engine sees that an operator must
// act on: Redis down or unsafe to fence on, writes a failover lost, two
// services or two processes contending for one name, occurrences on a
// queue no worker serves or served by the wrong service, and clock skew.
type RedisDiagnostics = core.Diagnostics

// Redis returns the Redis engine's diagnostics (core.Runtime.Diagnostics).
func (r *Runtime) Redis() *RedisDiagnostics { return r.Diagnostics() }
