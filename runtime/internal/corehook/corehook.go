// Package corehook hands package runtime, the Redis entry point, and its
// tests what package core keeps unexported: a core on another clock, the
// disabled reason and deliveries of a runtime without an engine, and the
// knobs the tests that play a stalled or zombie replica turn. Package core
// sets these in its init; being internal, they add nothing a service can
// reach. The types name no core type (core imports this package), so each
// takes the *core.Runtime as any.
package corehook

import (
	"context"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/engine"
	"github.com/belfry/belfry/runtime/internal/clock"
	"github.com/belfry/belfry/runtime/internal/testsignal"
)

// NewWithClock is core's New on clk: opts is a core.Options, the result a
// *core.Runtime.
var NewWithClock func(reg *registry.Registry, opts any, clk clock.Clock) (any, error)

// Validate checks reg and opts (a core.Options) as core's New does, first,
// so that package runtime checks the Redis engine's own options after
// them.
var Validate func(reg *registry.Registry, opts any) error

// Of returns the hooks of a *core.Runtime.
var Of func(rt any) Hooks

// Hooks reach one core runtime's internals.
type Hooks struct {
	// Disable states why a runtime built without an engine schedules
	// nothing, and reads its workers' deliveries (nil: none); called
	// before the runtime is used.
	Disable func(reason string, deliveries engine.Deliveries)
	// Engine is the engine the runtime runs on (configured), nil when
	// disabled.
	Engine func() engine.Engine
	// Scheduling reports whether the leader loop holds leader state.
	Scheduling func() bool
	// Enqueue enqueues a scheduled occurrence as the leader does, without
	// the leader's own lease check (ctx may carry the engine's fence).
	Enqueue func(ctx context.Context, occ registry.Occurrence) error
	// NoteEngine tells the runtime an engine call's outcome.
	NoteEngine func(err error)
	// JudgeSettingsEvery, LookForOldNamespaceEvery and CheckQueuesEvery
	// shorten the runtime's periodic checks.
	JudgeSettingsEvery       func(d time.Duration)
	LookForOldNamespaceEvery func(d time.Duration)
	CheckQueuesEvery         func(d time.Duration)
	// NamespaceChecks counts the namespace checks that reached the store.
	NamespaceChecks func() int
	// LoopSignals are the leader loop's test signals.
	LoopSignals func() LoopSignals
}

// LoopSignals are the leader loop's test signals, each off until a test
// turns it on with Init before Run.
type LoopSignals struct {
	Rebuilt *testsignal.Signal[string]    // state built for this lease value
	Stepped *testsignal.Signal[time.Time] // a step did the work due at this time
	Waiting *testsignal.Signal[time.Time] // asleep until this time on the clock, or an event
}
