package corehook

import (
	"context"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/internal/testsignal"
)

// TestKnobsOf returns the test knobs of a *core.Runtime. Test-only: no
// code on a service's path calls it; package runtime's export_test.go
// does, for the tests that play a stalled, zombie or impatient replica.
var TestKnobsOf func(rt any) TestKnobs

// TestKnobs are test-only: they let a test act as the runtime never does
// on purpose (enqueue past the leader's lease check, hear of an engine
// call that was not made) or hurry its periodic checks.
type TestKnobs struct {
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
