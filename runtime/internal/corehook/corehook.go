// Package corehook hands package runtime, the Redis entry point, what
// package core keeps unexported: a core on another clock, core's checks of
// its options, and the disabled reason and deliveries of a runtime
// without an engine (this file); and, for tests only, the knobs the tests
// that play a stalled or zombie replica turn (testknobs.go). Package core
// sets these in its init; being internal, they add nothing a service can
// reach. The types name no core type (core imports this package), so each
// takes the *core.Runtime as any.
package corehook

import (
	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/engine"
	"github.com/belfry/belfry/runtime/internal/clock"
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

// Hooks reach one core runtime's internals, for package runtime's New.
type Hooks struct {
	// Disable states why a runtime built without an engine schedules
	// nothing, and reads its workers' deliveries (nil: none); called
	// before the runtime is used.
	Disable func(reason string, deliveries engine.Deliveries)
	// Engine is the engine the runtime runs on (configured), nil when
	// disabled.
	Engine func() engine.Engine
}
