// Package enginetest is the conformance suite every engine of the runtime
// runs: the behaviours a service relies on, checked through the public API
// of package runtime/core only, so that one suite judges every engine
// alike and an engine's test needs no other engine's package.
//
// An engine's test supplies a Harness and calls Run:
//
//	func TestConformance(t *testing.T) { enginetest.Run(t, myHarness{}) }
//
// Each case is a subtest with backing state of its own (Harness.NewBackend),
// and the cases run in parallel. They use real replicas and real workers
// of the engine: a case that counts executions counts the handler's own,
// keyed on occ.Key(). docs/engines.md says what an engine must provide.
package enginetest

import (
	"testing"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/core"
)

// Harness builds an engine's backing state for the suite's cases. Its
// methods may be called from parallel cases at once.
type Harness interface {
	// NewBackend returns fresh backing state that no other case shares
	// (a namespace, a database) and that starts empty: no lease, cursors,
	// records, pauses or members. It is cleaned up, or left to expire,
	// when t ends. It fails t if the engine's server is not reachable; it
	// never skips.
	NewBackend(t testing.TB) Backend
}

// Backend is one case's backing state and how replicas and workers reach
// it.
type Backend interface {
	// Replica returns the options of one new replica over this backend,
	// and the link its connections to the backend go through. The options
	// have the engine's fields and Namespace set; the suite sets Replica,
	// LeaseTTL, Grace and Logger, and calls core.New with them (or the
	// Backend's own New, see Builder). Each
	// call returns a link of its own, serving only that replica, so that
	// cutting one replica off leaves the others connected. What the
	// options open is closed when t ends.
	Replica(t testing.TB) (core.Options, Link)
	// StartWorkers runs workers of the engine's queue for every schedule
	// of rt's registry, through rt's handlers (so rt records each
	// execution), until t ends. The workers reach the backend directly,
	// never through a replica's Link, and run at least four handlers at
	// once. A failed attempt that has retries left runs again promptly
	// (within a fraction of a second), not after the engine's default
	// back-off, so that the suite's retry cases stay short.
	StartWorkers(t testing.TB, rt *core.Runtime)
}

// Builder is a Backend that builds its replicas itself rather than with
// core.New: an engine whose service calls an entry point of its own (the
// Redis engine's runtime.New) checks that entry point so. New gets the
// options Replica returned, with the suite's settings, and returns the
// core of the runtime it built.
type Builder interface {
	New(reg *registry.Registry, opts core.Options) (*core.Runtime, error)
}

// Link is a replica's connection to the backend, which the suite cuts to
// make the replica a zombie and heals to let its late writes through.
// *netfault.Proxy (internal/netfault), a TCP proxy any engine's
// client can be pointed at, is one.
type Link interface {
	// BlackHole partitions the replica from the backend: connections stay
	// open, nothing is delivered either way and the replica sees only
	// timeouts. What it sends meanwhile is held, not lost.
	BlackHole()
	// Pass ends the partition: what was held is delivered, in order and
	// late, as TCP retransmits it when a partition heals.
	Pass()
}

// Run runs every case against the engine h builds, each as a parallel
// subtest of t.
func Run(t *testing.T, h Harness) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, h)
		})
	}
}

// cases are the suite's, in the order a reader meets them.
var cases = []struct {
	name string
	run  func(*testing.T, Harness)
}{
	{"ExactlyOnceUnderAZombieExLeader", zombieExLeader},
	{"TakeoverAfterACrash", takeoverAfterCrash},
	{"TakeoverAfterAGracefulShutdown", takeoverAfterShutdown},
	{"RerunAndRequestKeys", rerunAndRequestKeys},
	{"PauseAndResume", pauseAndResume},
	{"BackfillCap", backfillCap},
	{"FamilyChangeFloors", familyChangeFloors},
	{"TruthfulRecords", truthfulRecords},
	{"CarrierReachesTheHandler", carrierReachesTheHandler},
	{"BoundedReads", boundedReads},
	{"OverlapBufferOne", overlapBufferOne},
	{"OverlapBufferOneAfterARelease", overlapBufferOneAfterARelease},
	{"OverlapBufferOneTakeover", overlapBufferOneTakeover},
	{"OverlapReplace", overlapReplace},
}
