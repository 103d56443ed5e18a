package core

import (
	"context"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/engine"
	"github.com/belfry/belfry/runtime/internal/clock"
	"github.com/belfry/belfry/runtime/internal/corehook"
)

func init() {
	corehook.NewWithClock = func(reg *registry.Registry, opts any, clk clock.Clock) (any, error) {
		return newRuntime(reg, opts.(Options), clk)
	}
	corehook.Validate = func(reg *registry.Registry, opts any) error {
		o := opts.(Options)
		return validate(reg, &o)
	}
	corehook.Of = func(rt any) corehook.Hooks { return rt.(*Runtime).hooks() }
}

// hooks are what package runtime and its tests reach through corehook.
func (r *Runtime) hooks() corehook.Hooks {
	return corehook.Hooks{
		Disable: func(reason string, deliveries engine.Deliveries) {
			r.disabled, r.deliveries = reason, deliveries
		},
		Engine: func() engine.Engine {
			if r.disabled != "" {
				return nil
			}
			return r.eng
		},
		Scheduling: r.scheduling.Load,
		Enqueue: func(ctx context.Context, occ registry.Occurrence) error {
			s, _ := r.reg.Lookup(occ.Schedule)
			_, err := r.enqueue(ctx, s, occ, r.retention(s))
			return err
		},
		NoteEngine: r.noteRedis,
		JudgeSettingsEvery: func(d time.Duration) {
			r.redisCheck.mu.Lock()
			r.redisCheck.every = d
			r.redisCheck.mu.Unlock()
		},
		LookForOldNamespaceEvery: func(d time.Duration) {
			r.namespace.mu.Lock()
			r.namespace.legacyEvery = max(d, time.Nanosecond)
			r.namespace.mu.Unlock()
		},
		CheckQueuesEvery: func(d time.Duration) {
			r.unserved.mu.Lock()
			r.unserved.every = d
			r.unserved.mu.Unlock()
		},
		NamespaceChecks: func() int {
			r.namespace.mu.Lock()
			defer r.namespace.mu.Unlock()
			return r.namespace.checks
		},
		LoopSignals: func() corehook.LoopSignals {
			s := &r.loopSignals
			return corehook.LoopSignals{Rebuilt: &s.rebuilt, Stepped: &s.stepped, Waiting: &s.waiting}
		},
	}
}
