package core

import (
	"context"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/internal/corehook"
)

func init() {
	corehook.TestKnobsOf = func(rt any) corehook.TestKnobs { return rt.(*Runtime).testKnobs() }
}

// testKnobs are what package runtime's tests turn through corehook; none
// of them is on a service's path (corehook.TestKnobs).
func (r *Runtime) testKnobs() corehook.TestKnobs {
	return corehook.TestKnobs{
		Scheduling: r.scheduling.Load,
		Enqueue: func(ctx context.Context, occ registry.Occurrence) error {
			s, _ := r.reg.Lookup(occ.Schedule)
			_, err := r.enqueue(ctx, s, occ, r.retention(s, occ.Slot))
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
