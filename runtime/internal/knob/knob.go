// Package knob hands the runtime's own harnesses under runtime/internal
// (the bench) what the public API deliberately lacks: a Runtime on another
// clock, to place a run at a daylight-saving transition without waiting
// for one. Being internal, it adds nothing a service can reach.
package knob

// NewWithClock is set by package runtime to its New on another clock, a
// func(*registry.Registry, runtime.Options, clock.Clock) (*runtime.Runtime,
// error); the caller asserts that type, which this package cannot name
// without importing runtime.
var NewWithClock any
