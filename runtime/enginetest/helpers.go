package enginetest

import (
	"context"
	"crypto/rand"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/belfry/belfry/internal/testlog"
	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/core"
)

// replica is one runtime over a case's backend, its link and its Run.
type replica struct {
	rt     *core.Runtime
	link   Link
	cancel context.CancelFunc
	done   chan struct{}
}

// replicaSettings are what the suite sets in a replica's options.
type replicaSettings struct {
	leaseTTL time.Duration
	grace    time.Duration
	observer core.EnqueueObserver
}

// newReplica makes a runtime for reg named name over b, not yet running.
// When t ends it is stopped (its link healed first, so that its release
// is not held in a partition) and closed.
func newReplica(t *testing.T, b Backend, reg *registry.Registry, name string, s replicaSettings) *replica {
	t.Helper()
	opts, link := b.Replica(t)
	opts.Replica, opts.LeaseTTL, opts.Grace, opts.Logger = name, s.leaseTTL, s.grace, testLogger(t)
	opts.EnqueueObserver = s.observer
	build := core.New
	if b, ok := b.(Builder); ok {
		build = b.New
	}
	rt, err := build(reg, opts)
	if err != nil {
		t.Fatalf("building replica %s: %v", name, err)
	}
	r := &replica{rt: rt, link: link}
	t.Cleanup(func() {
		link.Pass()
		r.stop()
		rt.Close()
	})
	return r
}

// start runs the replica until stop or the end of the test.
func (r *replica) start() {
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel, r.done = cancel, make(chan struct{})
	go func() { defer close(r.done); r.rt.Run(ctx) }()
}

// stop ends the replica's Run, as a graceful shutdown does, and waits for
// it. Stopping a replica that is not running does nothing.
func (r *replica) stop() {
	if r.cancel == nil {
		return
	}
	r.cancel()
	<-r.done
	r.cancel = nil
}

func (r *replica) leading() bool { return r.rt.Leadership().Leading() }

// cutOnEnqueue is an EnqueueObserver that cuts a replica's link the
// moment the replica sets out to enqueue a scheduled occurrence, once
// armed: the enqueue is sent into the partition by a replica that leads.
type cutOnEnqueue struct {
	mu    sync.Mutex
	link  Link // nil until armed
	cut   registry.Occurrence
	cutAt time.Time
}

// arm has the next scheduled enqueue cut link off.
func (c *cutOnEnqueue) arm(link Link) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.link = link
}

func (c *cutOnEnqueue) BeforeEnqueue(_ context.Context, _ *registry.Schedule, occ registry.Occurrence) (map[string]string, func(bool, error)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.link != nil && !occ.Manual && c.cutAt.IsZero() {
		c.link.BlackHole()
		c.cut, c.cutAt = occ, time.Now()
	}
	return nil, nil
}

// done returns the occurrence whose enqueue was cut off and when, zero
// before.
func (c *cutOnEnqueue) done() (registry.Occurrence, time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cut, c.cutAt
}

// executions counts the handler's runs by occ.Key(), independently of the
// runtime's records.
type executions struct {
	mu   sync.Mutex
	runs []registry.Occurrence
}

func (e *executions) handler(_ context.Context, occ registry.Occurrence) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.runs = append(e.runs, occ)
	return nil
}

// all returns every run so far, in the order they ran.
func (e *executions) all() []registry.Occurrence {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.runs)
}

// where returns the runs that keep says to.
func (e *executions) where(keep func(registry.Occurrence) bool) []registry.Occurrence {
	var out []registry.Occurrence
	for _, occ := range e.all() {
		if keep(occ) {
			out = append(out, occ)
		}
	}
	return out
}

// scheduled returns the clock's runs of the schedule (not manual ones),
// for a family those of one member.
func (e *executions) scheduled(name, member string) []registry.Occurrence {
	return e.where(func(occ registry.Occurrence) bool {
		return occ.Schedule == name && occ.Member == member && !occ.Manual
	})
}

// ranAfter reports whether the schedule (member) ran n slots after at.
func (e *executions) ranAfter(name, member string, at time.Time, n int) func() bool {
	return func() bool {
		k := 0
		for _, occ := range e.scheduled(name, member) {
			if occ.Slot.After(at) {
				k++
			}
		}
		return k >= n
	}
}

// assertOncePerSlot checks that runs, the scheduled runs of one schedule
// (or member), ran every slot of s from the first to the last exactly once,
// by occ.Key(): none twice, none missing between.
func assertOncePerSlot(t *testing.T, s *registry.Schedule, runs []registry.Occurrence) {
	t.Helper()
	if len(runs) == 0 {
		t.Error("no slot ran")
		return
	}
	byKey := map[string]int{}
	var slots []time.Time
	for _, occ := range runs {
		if byKey[occ.Key()]++; byKey[occ.Key()] == 1 {
			slots = append(slots, occ.Slot)
		}
	}
	for key, n := range byKey {
		if n != 1 {
			t.Errorf("%s ran %d times, want once", key, n)
		}
	}
	slices.SortFunc(slots, time.Time.Compare)
	for i := 1; i < len(slots); i++ {
		if want := s.Next(slots[i-1]); !want.Equal(slots[i]) {
			t.Errorf("slot %s never ran (between %s and %s)", stamp(want), stamp(slots[i-1]), stamp(slots[i]))
		}
	}
}

func stamp(at time.Time) string { return at.UTC().Format("15:04:05") }

// waitFor polls cond until it holds or within passes, then fails t with
// what it waited for.
func waitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// queueName returns a queue name no other case uses, in this process or
// another sharing the engine's server: lower-case letters, digits and
// dashes, which every queue accepts.
func queueName(prefix string) string {
	return prefix + "-" + strings.ToLower(rand.Text()[:12])
}

// mustRegistry builds a registry or fails t.
func mustRegistry(t *testing.T, scheds ...registry.Schedule) *registry.Registry {
	t.Helper()
	reg, err := registry.New(scheds...)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// testLogger logs the runtime's warnings and errors to t.
func testLogger(t testing.TB) *slog.Logger {
	return testlog.New(t, slog.LevelWarn)
}
