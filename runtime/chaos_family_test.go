package runtime_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
	"github.com/belfry/belfry/runtime/internal/chaoskit"
)

// The chaos run's family: members in DST zones and zones with odd offsets,
// some with their own expression, added, moved and deleted while the
// faults play, and put back by an operator's sync loop when Redis loses
// them. Every (member, slot) that came due while the member surely existed
// must run once; none may run twice, nor after its member was deleted.

const chaosFamily = "family"

func chaosFamilySchedule(h registry.HandlerFunc) registry.Schedule {
	return registry.Schedule{Name: chaosFamily, Expr: "* * * * * *", Per: "tenant", Queue: chaosQueue,
		Timeout: 10 * time.Second, MaxRetry: 5, Handler: h}
}

// chaosRecordName is the name an execution is recorded under: a member's
// own for a family.
func chaosRecordName(occ registry.Occurrence) string {
	if occ.Member != "" {
		return occ.Schedule + "/" + occ.Member
	}
	return occ.Schedule
}

// chaosOrdinary counts the registry's schedules that have a cursor of
// their own (not families).
func chaosOrdinary(reg *registry.Registry) int {
	n := 0
	for _, s := range reg.Schedules() {
		if !s.Family() {
			n++
		}
	}
	return n
}

// chaosMember is one member's life in the run.
type chaosMember struct {
	runtime.Member
	added, deleted time.Time // deleted zero while alive
}

type chaosFamilyRun struct {
	h    *chaosHarness
	rt   *runtime.Runtime
	mu   sync.Mutex
	all  []*chaosMember
	gaps [][2]time.Time // the members were gone from Redis (a flush) until put back
	done chan struct{}
}

var chaosFamilyZones = []string{"America/New_York", "Europe/London", "Australia/Lord_Howe", "Asia/Kathmandu",
	"America/St_Johns", "Pacific/Chatham", "Europe/Berlin", "America/Santiago", "Asia/Tokyo", "UTC"}

// familyChurn adds the family's first members now and, until the faults
// end, adds one, deletes one and moves one every eighth of the run.
func (h *chaosHarness) familyChurn(reg *registry.Registry, start time.Time) *chaosFamilyRun {
	rt, err := runtime.New(reg, runtime.Options{Redis: h.rdb, Namespace: chaosNamespace, Replica: "family-operator",
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		h.t.Fatal(err)
	}
	f := &chaosFamilyRun{h: h, rt: rt, done: make(chan struct{})}
	next := 0
	newMember := func() runtime.Member {
		m := runtime.Member{Key: fmt.Sprintf("tenant-%02d", next), Zone: chaosFamilyZones[next%len(chaosFamilyZones)]}
		if next%3 == 1 {
			m.Expr = "*/2 * * * * *"
		}
		next++
		return m
	}
	for range 8 {
		f.add(newMember())
	}
	go func() {
		defer close(f.done)
		step := h.cfg.Duration / 8
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		churnAt := start.Add(step)
		lastOK := time.Now()
		for time.Now().Before(start.Add(h.cfg.Duration)) {
			<-tick.C
			// An operator's sync loop: members Redis lost are put back.
			if missing := f.missing(); missing > 0 {
				if f.retry("put back", func(ctx context.Context) error { return f.rt.Families().SetMany(ctx, chaosFamily, f.alive()) }) {
					f.mu.Lock()
					f.gaps = append(f.gaps, [2]time.Time{lastOK, time.Now()})
					f.mu.Unlock()
					h.logf("family: %d members were gone from Redis; put back", missing)
				}
			} else if missing == 0 {
				lastOK = time.Now()
			}
			if time.Now().Before(churnAt) {
				continue
			}
			churnAt = churnAt.Add(step)
			f.add(newMember())
			f.deleteOldest()
			f.moveEast()
		}
	}()
	return f
}

// retry runs do until it succeeds (Redis may be restarting) or the run
// is long over.
func (f *chaosFamilyRun) retry(what string, do func(context.Context) error) bool {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := do(ctx)
		cancel()
		if err == nil {
			return true
		}
		f.h.logf("family: %s failed, retrying: %v", what, err)
		time.Sleep(100 * time.Millisecond)
	}
	f.h.t.Errorf("chaos: family: %s kept failing", what)
	return false
}

func (f *chaosFamilyRun) add(m runtime.Member) {
	cm := &chaosMember{Member: m}
	if f.retry("add "+m.Key, func(ctx context.Context) error { _, err := f.rt.Families().Set(ctx, chaosFamily, m); return err }) {
		cm.added = time.Now()
		f.mu.Lock()
		f.all = append(f.all, cm)
		f.mu.Unlock()
		f.h.logf("family: added %s (%s %q)", m.Key, m.Zone, m.Expr)
	}
}

func (f *chaosFamilyRun) deleteOldest() {
	f.mu.Lock()
	var victim *chaosMember
	for _, m := range f.all {
		if m.deleted.IsZero() {
			victim = m
			break
		}
	}
	f.mu.Unlock()
	if victim == nil {
		return
	}
	if f.retry("delete "+victim.Key, func(ctx context.Context) error {
		err := f.rt.Families().Delete(ctx, chaosFamily, victim.Key)
		if err != nil && strings.Contains(err.Error(), runtime.ErrNoMember.Error()) {
			return nil // gone already (a flush); deleted all the same
		}
		return err
	}) {
		f.mu.Lock()
		victim.deleted = time.Now()
		f.mu.Unlock()
		f.h.logf("family: deleted %s", victim.Key)
	}
}

// moveEast moves the newest member east (to Asia/Tokyo): its slots go on
// at the same instants, none twice.
func (f *chaosFamilyRun) moveEast() {
	f.mu.Lock()
	var m *chaosMember
	for _, cm := range f.all {
		if cm.deleted.IsZero() && cm.Zone == "America/New_York" && cm.Expr == "" {
			m = cm
		}
	}
	f.mu.Unlock()
	if m == nil {
		return
	}
	moved := m.Member
	moved.Zone = "Asia/Tokyo"
	if f.retry("move "+m.Key, func(ctx context.Context) error { _, err := f.rt.Families().Set(ctx, chaosFamily, moved); return err }) {
		f.mu.Lock()
		m.Member = moved
		f.mu.Unlock()
		f.h.logf("family: moved %s to Asia/Tokyo", m.Key)
	}
}

func (f *chaosFamilyRun) alive() []runtime.Member {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []runtime.Member
	for _, m := range f.all {
		if m.deleted.IsZero() {
			out = append(out, m.Member)
		}
	}
	return out
}

// missing is how many alive members Redis does not hold, -1 if it cannot
// tell (Redis down).
func (f *chaosFamilyRun) missing() int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	n, err := f.rt.Families().Count(ctx, chaosFamily)
	if err != nil {
		return -1
	}
	return max(0, len(f.alive())-int(n))
}

// certain says whether a member's slot surely came due while it existed
// and Redis held it, judged with margin for the leaders' skewed clocks
// and the leader's poll; false for slots either way is right. quiet are
// the stretches in which no leader enqueued any member's task.
func (f *chaosFamilyRun) certain(m *chaosMember, slot time.Time, quiet [][2]time.Time) bool {
	margin := f.h.cfg.Skew + 2*time.Second
	if !slot.After(m.added.Add(time.Second)) || !m.deleted.IsZero() && slot.After(m.deleted.Add(-margin)) {
		return false
	}
	// Deleted while the leader was catching up after an outage: it may
	// not have reached the slot before the member was gone.
	if !m.deleted.IsZero() && slot.Before(m.deleted) && quietBefore(quiet, slot, m.deleted, margin) {
		return false
	}
	for _, g := range f.gaps {
		if slot.After(g[0].Add(-margin)) && slot.Before(g[1].Add(margin)) {
			return false
		}
	}
	return true
}

// slots lists, per "family/<member>", the slots in [from, to] that must
// run once.
func (f *chaosFamilyRun) slots(from, to time.Time) map[string][]int64 {
	<-f.done
	f.mu.Lock()
	defer f.mu.Unlock()
	// The leader's progress through the members' slots, from what it
	// enqueued: a member's task ID without its slot.
	var prefixes []string
	for _, m := range f.all {
		prefixes = append(prefixes, strings.TrimSuffix(chaosTaskID(chaosFamily+"/"+m.Key, 0), "0"))
	}
	quiet := f.h.readEnqueueLogs().quietStretches(prefixes, time.Now())
	out := map[string][]int64{}
	for _, m := range f.all {
		s, err := f.rt.Families().Schedule(chaosFamily, m.Member)
		if err != nil {
			f.h.t.Fatal(err)
		}
		for slot := s.Next(from.Add(-time.Nanosecond)); !slot.IsZero() && !slot.After(to); slot = s.Next(slot) {
			if f.certain(m, slot, quiet) {
				out[chaosFamily+"/"+m.Key] = append(out[chaosFamily+"/"+m.Key], slot.Unix())
			}
		}
	}
	return out
}

// familyCounts are what check counts of the family's slots.
type familyCounts struct {
	occurrences, duplicates, missed, afterDelete, queuedAtFlush int
	// failoverReruns and windowReruns are the extra first attempts around
	// a change of primary and inside a detected data-loss window, as for
	// a schedule's slots.
	failoverReruns, windowReruns int
}

// check counts the family's occurrences, duplicates and missed slots, and
// the slots whose task a FLUSHALL took (see chaosHarness.unran), and
// reports runs after a member's deletion.
func (f *chaosFamilyRun) check(t *testing.T, due map[string][]int64, runs, retries map[string]map[int64]int,
	lost []runtime.LostWrites, enqueues enqueueLogs) (c familyCounts) {
	for name, list := range due {
		for _, slot := range list {
			if inLostWindow(lost, time.Unix(slot, 0)) {
				continue
			}
			if runs[name][slot]+retries[name][slot] == 0 {
				at := time.Unix(slot, 0).UTC().Format(time.TimeOnly)
				if flushed, why := f.h.unran(enqueues, name, slot); flushed {
					c.queuedAtFlush++
					t.Logf("chaos: %s slot %s (%d) never ran: %s", name, at, slot, why)
				} else {
					c.occurrences++
					c.missed++
					t.Errorf("chaos: %s slot %s (%d) never ran: %s", name, at, slot, why)
				}
				continue
			}
			c.occurrences++
		}
	}
	if c.occurrences == 0 {
		t.Error("chaos: no family member's slot came due in the window")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	margin := f.h.cfg.Skew + 2*time.Second
	for _, m := range f.all {
		name := chaosFamily + "/" + m.Key
		for slot, n := range runs[name] {
			switch {
			case n > 1 && f.h.switchesPrimary() && f.h.nearSwitch(enqueues.firstEnqueue(name, slot)):
				c.failoverReruns += n - 1
				t.Logf("chaos: %s slot %d ran %d times as a first attempt, around a change of primary", name, slot, n)
			case n > 1 && inLostWindow(lost, time.Unix(slot, 0)):
				// As for a schedule: the task IDs that stop a second
				// enqueue went with the data, as the recorded loss says.
				c.windowReruns += n - 1
				t.Logf("chaos: %s slot %d ran %d times as a first attempt, inside a detected data-loss window", name, slot, n)
			case n > 1:
				c.duplicates += n - 1
				t.Errorf("chaos: %s slot %d ran %d times as a first attempt", name, slot, n)
			}
			if !m.deleted.IsZero() && time.Unix(slot, 0).After(m.deleted.Add(margin)) {
				c.afterDelete++
				t.Errorf("chaos: %s slot %d ran after the member was deleted at %s", name, slot, m.deleted.Format(time.TimeOnly))
			}
		}
	}
	return c
}

// A member deleted during an outage: the slots the leader had not
// enqueued when the outage began are not owed, even when a worker runs a
// task in the middle of it (a zombie waking, asynq re-delivering an
// orphaned task), which ends a stretch of no executions but not one of
// no enqueues. The slots due well before the outage are owed.
func TestChaosJudgesADeletedMemberByTheLeadersEnqueues(t *testing.T) {
	at := func(sec float64) time.Time {
		return time.Date(2026, 12, 4, 20, 42, 0, 0, time.UTC).Add(time.Duration(sec * float64(time.Second)))
	}
	logs := enqueueLogs{byTask: map[string][]enqueueRecord{}}
	enqueue := func(member string, slot, when float64) {
		id := chaosTaskID(chaosFamily+"/"+member, at(slot).Unix())
		logs.byTask[id] = append(logs.byTask[id], enqueueRecord{at: at(when), kind: "inserted", taskID: id})
	}
	// The leader keeps up until 30s, then a failover stops every write
	// until 44.4s, when the new leader catches up.
	for s := 20; s <= 30; s++ {
		enqueue("tenant-00", float64(s), float64(s)+0.01)
		enqueue("tenant-01", float64(s), float64(s)+0.02)
	}
	for s := 31; s <= 44; s++ {
		enqueue("tenant-01", float64(s), 44.4)
	}
	prefixes := []string{strings.TrimSuffix(chaosTaskID(chaosFamily+"/tenant-00", 0), "0"),
		strings.TrimSuffix(chaosTaskID(chaosFamily+"/tenant-01", 0), "0")}
	quiet := logs.quietStretches(prefixes, at(46))
	if len(quiet) != 1 || !quiet[0][0].Equal(at(30.02)) || !quiet[0][1].Equal(at(44.4)) {
		t.Fatalf("quiet stretches %v, want the one from 30.02s to 44.4s", quiet)
	}
	f := &chaosFamilyRun{h: &chaosHarness{cfg: chaoskit.Config{Skew: 3 * time.Second}}}
	deleted := &chaosMember{Member: runtime.Member{Key: "tenant-00"}, added: at(0), deleted: at(41.985)}
	for _, c := range []struct {
		slot float64
		owed bool
	}{{20, true}, {25, true}, {31, false}, {36, false}} {
		if got := f.certain(deleted, at(c.slot), quiet); got != c.owed {
			t.Errorf("slot at %vs of a member deleted at 41.985s: owed %v, want %v", c.slot, got, c.owed)
		}
	}
}
