package enginetest

import (
	"slices"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
)

// takeoverTTL is the lease TTL of the takeover cases: short, so a takeover
// after a crash takes seconds, and long enough that a loaded machine's
// slow call does not move the lease by itself.
const takeoverTTL = 2 * time.Second

// pair is two replicas of one per-second schedule over one backend, with
// workers on the second, which the cases never cut off.
type pair struct {
	tick *registry.Schedule
	exec *executions
	a, b *replica
	// aCutter cuts a off as it enqueues, once armed.
	aCutter *cutOnEnqueue
}

// newPair starts a and waits for it to lead, then starts b: a leads.
func newPair(t *testing.T, h Harness, ttl time.Duration) *pair {
	t.Helper()
	p := &pair{exec: &executions{}, aCutter: &cutOnEnqueue{}}
	settings := replicaSettings{leaseTTL: ttl, grace: time.Minute}
	reg := mustRegistry(t, registry.Schedule{Name: "tick", Expr: "* * * * * *", Queue: queueName("tick"), Handler: p.exec.handler})
	p.tick = reg.Schedules()[0]
	b := h.NewBackend(t)
	aSettings := settings
	aSettings.observer = p.aCutter
	p.a = newReplica(t, b, reg, "a", aSettings)
	p.b = newReplica(t, b, reg, "b", settings)
	b.StartWorkers(t, p.b.rt)
	p.a.start()
	waitFor(t, 10*time.Second, "replica a to lead", p.a.leading)
	p.b.start()
	waitFor(t, 10*time.Second, "two slots to run under a", p.exec.ranAfter("tick", "", time.Time{}, 2))
	return p
}

// A leader is cut off from the backend the moment it sets out to enqueue
// a slot: the enqueue it sends, as the leader, is held in the partition.
// Its lease lapses, the other replica takes over and runs that slot and the
// next, and they finish long enough ago that no retention of their IDs
// remains. Then the partition heals and the zombie's enqueue arrives, late:
// the engine must refuse it. Every slot from the first to the last ran
// once, by occ.Key(), the cut one included, and none was missed.
func zombieExLeader(t *testing.T, h Harness) {
	p := newPair(t, h, takeoverTTL)
	// Cut a off as it enqueues a slot: the enqueue is sent into the
	// partition, by a replica that leads.
	p.aCutter.arm(p.a.link)
	var cut registry.Occurrence
	var cutAt time.Time
	waitFor(t, 5*time.Second, "a to set out to enqueue a slot", func() bool {
		cut, cutAt = p.aCutter.done()
		return !cutAt.IsZero()
	})
	waitFor(t, 3*takeoverTTL, "b to take over from the cut-off leader", p.b.leading)
	if p.a.leading() {
		t.Error("the cut-off replica still trusts its lease after another replica took it")
	}
	t.Logf("a was cut off enqueueing %s; b led %s later", cut.Key(), time.Since(cutAt).Round(time.Millisecond))
	// Long enough that the slots a tried to enqueue have run and finished
	// more than a TTL ago: a late write must be refused by the engine,
	// not only by a task ID the engine still remembers.
	tookOver := time.Now()
	waitFor(t, 5*takeoverTTL, "slots to run under b", p.exec.ranAfter("tick", "", tookOver.Add(2*takeoverTTL), 1))
	p.a.link.Pass()
	healed := time.Now()
	waitFor(t, 10*time.Second, "three slots after the partition healed", p.exec.ranAfter("tick", "", healed, 3))
	if !p.b.leading() || p.a.leading() {
		t.Errorf("after the heal a leads %v, b leads %v; want b alone", p.a.leading(), p.b.leading())
	}
	p.a.stop()
	p.b.stop()
	runs := p.exec.scheduled("tick", "")
	assertOncePerSlot(t, p.tick, runs)
	if !slices.ContainsFunc(runs, func(occ registry.Occurrence) bool { return occ.Key() == cut.Key() }) {
		t.Errorf("the slot a was cut off enqueueing, %s, never ran", cut.Key())
	}
}

// The leader crashes: it stops without releasing its lease (cut off for
// good, as a killed process or a lost host leaves it). The other replica
// takes over once the lease lapses and runs the slots that came due
// meanwhile: none missed, none twice.
func takeoverAfterCrash(t *testing.T, h Harness) {
	p := newPair(t, h, takeoverTTL)
	p.a.link.BlackHole() // healed only when the test ends
	crashed := time.Now()
	waitFor(t, 3*takeoverTTL, "b to take over from the crashed leader", p.b.leading)
	waitFor(t, 10*time.Second, "three slots after the takeover", p.exec.ranAfter("tick", "", time.Now(), 3))
	p.b.stop()
	runs := p.exec.scheduled("tick", "")
	assertOncePerSlot(t, p.tick, runs)
	if last := runs[len(runs)-1].Slot; !last.After(crashed.Add(takeoverTTL)) {
		t.Errorf("the last slot run was %s, before the takeover", stamp(last))
	}
}

// The leader shuts down gracefully: it releases its lease, the other
// replica takes over at once (well before the TTL would have lapsed) and
// runs the next slots: none missed, none twice.
func takeoverAfterShutdown(t *testing.T, h Harness) {
	const ttl = 10 * time.Second // a takeover by expiry would be seen
	p := newPair(t, h, ttl)
	stopped := time.Now()
	p.a.stop()
	waitFor(t, ttl, "b to take over from the stopped leader", p.b.leading)
	if took := time.Since(stopped); took > ttl/3 {
		t.Errorf("b took over %s after a graceful shutdown; want at once, not at the %s TTL", took, ttl)
	}
	waitFor(t, 10*time.Second, "three slots after the takeover", p.exec.ranAfter("tick", "", time.Now(), 3))
	p.b.stop()
	assertOncePerSlot(t, p.tick, p.exec.scheduled("tick", ""))
}
