package enginetest

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/core"
)

// overrunner is a handler that blocks until the test lets it go (or its
// ctx ends), and notes every run: its occurrence, how it ended, and the
// most runs at once.
type overrunner struct {
	release chan struct{}
	// one lets one running handler go, where release lets all.
	one     chan struct{}
	mu      sync.Mutex
	running int
	most    int
	runs    []registry.Occurrence
	ended   map[string]error // by occurrence ID
}

func newOverrunner() *overrunner {
	return &overrunner{release: make(chan struct{}), one: make(chan struct{}), ended: map[string]error{}}
}

func (o *overrunner) handler(ctx context.Context, occ registry.Occurrence) error {
	o.mu.Lock()
	o.running++
	o.most = max(o.most, o.running)
	o.runs = append(o.runs, occ)
	o.mu.Unlock()
	var err error
	select {
	case <-o.release:
	case <-o.one:
	case <-ctx.Done():
		err = ctx.Err()
	}
	o.mu.Lock()
	o.running--
	o.ended[occ.ID] = err
	o.mu.Unlock()
	return err
}

func (o *overrunner) started() []registry.Occurrence {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]registry.Occurrence(nil), o.runs...)
}

func (o *overrunner) endedWith(id string) (error, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	err, ok := o.ended[id]
	return err, ok
}

func (o *overrunner) mostAtOnce() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.most
}

// byOutcome is a schedule's history, oldest slot first, of the outcome.
func byOutcome(t *testing.T, rt *core.Runtime, name string, outcome core.Outcome) []core.Record {
	t.Helper()
	hist, err := rt.History(context.Background(), name, 50)
	if err != nil {
		t.Fatalf("History: %v", err)
	}
	var out []core.Record
	for i := len(hist) - 1; i >= 0; i-- {
		if hist[i].Outcome == outcome {
			out = append(out, hist[i])
		}
	}
	return out
}

// overlap=buffer_one under a handler that overruns three slots: the slot
// after the running one's waits (buffered), the two after it are skipped,
// and the waiting one runs once the running one ends, never beside it.
func overlapBufferOne(t *testing.T, h Harness) {
	o := newOverrunner()
	r := single(t, h, nil, overrunning(registry.OverlapBufferOne, o))
	first, buffered, skipped := bufferedBehindTheFirst(t, r.rt, o)
	close(o.release)
	waitFor(t, 10*time.Second, "the buffered slot to run once the first ended", func() bool { return len(o.started()) >= 2 })
	r.stop()
	checkBuffered(t, r.rt, o, first, buffered, skipped)
}

// Once the waiting slot runs, the schedule's running occurrence is that
// one: the next slot waits behind it in turn (buffered, naming it),
// rather than running beside it.
func overlapBufferOneAfterARelease(t *testing.T, h Harness) {
	o := newOverrunner()
	r := single(t, h, nil, overrunning(registry.OverlapBufferOne, o))
	first, buffered, _ := bufferedBehindTheFirst(t, r.rt, o)
	o.one <- struct{}{}
	waitFor(t, 10*time.Second, "the buffered slot to run once the first ended", func() bool { return len(o.started()) >= 2 })
	second := o.started()[1]
	if second.ID == first.ID || !second.Slot.Equal(buffered.Slot) {
		t.Fatalf("second run %s of slot %s, want the buffered slot %s", second.ID, stamp(second.Slot), stamp(buffered.Slot))
	}
	waitFor(t, 10*time.Second, "a slot buffered behind the released one", func() bool {
		if o.mostAtOnce() > 1 {
			t.Fatalf("%d runs at once: a slot ran beside the released %s", o.mostAtOnce(), second.ID)
		}
		for _, rec := range byOutcome(t, r.rt, "overruns", core.OutcomeBuffered) {
			if strings.Contains(rec.Error, "waits behind "+second.ID) {
				return true
			}
		}
		return false
	})
	r.stop()
	close(o.release)
	if m := o.mostAtOnce(); m != 1 {
		t.Errorf("%d runs at once, want 1", m)
	}
}

// The leader that holds a slot waiting behind the running occurrence
// crashes; the replica that takes over reads the waiting slot back and
// runs it once the running one ends, once, and never beside it.
func overlapBufferOneTakeover(t *testing.T, h Harness) {
	o := newOverrunner()
	reg := mustRegistry(t, overrunning(registry.OverlapBufferOne, o))
	b := h.NewBackend(t)
	settings := replicaSettings{leaseTTL: takeoverTTL, grace: time.Minute}
	a, next := newReplica(t, b, reg, "a", settings), newReplica(t, b, reg, "b", settings)
	b.StartWorkers(t, next.rt)
	a.start()
	waitFor(t, 10*time.Second, "replica a to lead", a.leading)
	next.start()
	first, buffered, skipped := bufferedBehindTheFirst(t, next.rt, o)
	a.link.BlackHole() // healed only when the test ends
	waitFor(t, 3*takeoverTTL, "b to take over from the crashed leader", next.leading)
	close(o.release)
	waitFor(t, 10*time.Second, "the buffered slot to run under b", func() bool { return len(o.started()) >= 2 })
	next.stop()
	checkBuffered(t, next.rt, o, first, buffered, skipped)
}

// overrunning is a per-second schedule of o's handler with overlap.
func overrunning(overlap registry.Overlap, o *overrunner) registry.Schedule {
	return registry.Schedule{Name: "overruns", Expr: "* * * * * *", Queue: queueName("q"), Overlap: overlap,
		MaxRetry: 2, Timeout: time.Minute, Handler: o.handler}
}

// bufferedBehindTheFirst waits for the first run and, while it runs, the
// next slot recorded buffered and two more skipped, each saying why.
func bufferedBehindTheFirst(t *testing.T, rt *core.Runtime, o *overrunner) (first registry.Occurrence, buffered core.Record, skipped []core.Record) {
	t.Helper()
	waitFor(t, 10*time.Second, "the first run", func() bool { return len(o.started()) >= 1 })
	first = o.started()[0]
	waitFor(t, 10*time.Second, "one slot buffered and two skipped behind the running one", func() bool {
		return len(byOutcome(t, rt, "overruns", core.OutcomeBuffered)) == 1 &&
			len(byOutcome(t, rt, "overruns", core.OutcomeSkipped)) >= 2
	})
	buffered = byOutcome(t, rt, "overruns", core.OutcomeBuffered)[0]
	skipped = byOutcome(t, rt, "overruns", core.OutcomeSkipped)
	if n := len(o.started()); n != 1 {
		t.Fatalf("%d runs while the first still ran, want 1 (the buffered slot must wait)", n)
	}
	if !buffered.Slot.After(first.Slot) || !skipped[0].Slot.After(buffered.Slot) {
		t.Errorf("first run %s, buffered %s, first skipped %s: want them in that order",
			stamp(first.Slot), stamp(buffered.Slot), stamp(skipped[0].Slot))
	}
	if !strings.Contains(buffered.Error, "waits behind "+first.ID) {
		t.Errorf("buffered record says %q, want it to name the running %s", buffered.Error, first.ID)
	}
	for _, rec := range skipped {
		if !strings.Contains(rec.Error, "already waits behind "+first.ID) {
			t.Errorf("skipped record of %s says %q, want that a buffered slot already waits", stamp(rec.Slot), rec.Error)
		}
	}
	return first, buffered, skipped
}

// checkBuffered checks, once the buffered slot ran, that it ran second,
// alone, that no skipped slot ran, and that its record shows the run.
func checkBuffered(t *testing.T, rt *core.Runtime, o *overrunner, first registry.Occurrence, buffered core.Record, skipped []core.Record) {
	t.Helper()
	runs := o.started()
	if runs[0].ID != first.ID || !runs[1].Slot.Equal(buffered.Slot) {
		t.Errorf("runs of slots %s then %s, want %s then the buffered %s",
			stamp(runs[0].Slot), stamp(runs[1].Slot), stamp(first.Slot), stamp(buffered.Slot))
	}
	seen := map[string]bool{}
	for _, run := range runs {
		if seen[run.ID] {
			t.Errorf("%s ran twice", run.ID)
		}
		seen[run.ID] = true
		for _, s := range skipped {
			if run.Slot.Equal(s.Slot) {
				t.Errorf("slot %s ran, but was recorded skipped", stamp(s.Slot))
			}
		}
	}
	if m := o.mostAtOnce(); m != 1 {
		t.Errorf("%d runs at once, want 1", m)
	}
	waitFor(t, 10*time.Second, "the buffered slot's record to show its run", func() bool {
		for _, rec := range byOutcome(t, rt, "overruns", core.OutcomeSucceeded) {
			if rec.Slot.Equal(buffered.Slot) {
				return true
			}
		}
		return false
	})
}

// overlap=replace under a handler that overruns three slots: each new
// slot cancels the running occurrence, whose handler sees its ctx end and
// whose record says replaced by the next one (not failed, and not run
// again); the last one, left alone, completes.
func overlapReplace(t *testing.T, h Harness) {
	o := newOverrunner()
	r := single(t, h, nil, overrunning(registry.OverlapReplace, o))
	waitFor(t, 15*time.Second, "three runs, each replaced by the next", func() bool {
		return len(byOutcome(t, r.rt, "overruns", core.OutcomeReplaced)) >= 3
	})
	r.stop() // no new slot: the newest occurrence is left alone
	replaced := byOutcome(t, r.rt, "overruns", core.OutcomeReplaced)
	// The cancel reaches a running handler a moment after its record.
	waitFor(t, 10*time.Second, "every replaced run's handler to end", func() bool {
		for _, run := range o.started() {
			for _, rec := range replaced {
				if _, ended := o.endedWith(rec.ID); rec.ID == run.ID && !ended {
					return false
				}
			}
		}
		return true
	})
	close(o.release)
	for _, rec := range replaced {
		by, ok := strings.CutPrefix(rec.Error, "replaced by ")
		if !ok || !strings.HasPrefix(by, "cron:") || by == rec.ID {
			t.Errorf("record of %s says %q, want \"replaced by <the next occurrence>\"", rec.ID, rec.Error)
		}
		if err, ended := o.endedWith(rec.ID); ended && err == nil {
			t.Errorf("replaced %s returned without its ctx ending", rec.ID)
		}
	}
	var last registry.Occurrence
	waitFor(t, 15*time.Second, "the newest occurrence to complete", func() bool {
		runs := o.started()
		last = runs[len(runs)-1]
		for _, rec := range byOutcome(t, r.rt, "overruns", core.OutcomeSucceeded) {
			if rec.ID == last.ID {
				return true
			}
		}
		return false
	})
	// A cancelled task that the queue delivers again (asynq retries it,
	// promptly under StartWorkers) must not run the handler a second time.
	seen := map[string]int{}
	for _, run := range o.started() {
		seen[run.ID]++
		if seen[run.ID] > 1 {
			t.Errorf("%s ran %d times", run.ID, seen[run.ID])
		}
	}
	for _, rec := range byOutcome(t, r.rt, "overruns", core.OutcomeFailed) {
		t.Errorf("%s recorded failed (%s); a replaced occurrence is recorded replaced", rec.ID, rec.Error)
	}
	for _, rec := range byOutcome(t, r.rt, "overruns", core.OutcomeRetrying) {
		t.Errorf("%s recorded retrying (%s); a replaced occurrence is not retried", rec.ID, rec.Error)
	}
	rerunOfAReplacedSlotRuns(t, r.rt, o, replaced[0])
}

// A re-run of a replaced slot is an occurrence of its own, which nothing
// replaced: it runs and is recorded succeeded, though it has the replaced
// occurrence's key.
func rerunOfAReplacedSlotRuns(t *testing.T, rt *core.Runtime, o *overrunner, replaced core.Record) {
	t.Helper()
	rerun, err := rt.Rerun(context.Background(), "overruns", replaced.Slot, "after-replace")
	if err != nil {
		t.Fatalf("Rerun of the replaced slot %s: %v", stamp(replaced.Slot), err)
	}
	if rerun.Key() != replaced.ID {
		t.Fatalf("re-run key %q, want the replaced occurrence's %q", rerun.Key(), replaced.ID)
	}
	waitFor(t, 15*time.Second, "the re-run of the replaced slot to run and succeed", func() bool {
		for _, rec := range byOutcome(t, rt, "overruns", core.OutcomeSucceeded) {
			if rec.ID == rerun.ID {
				return true
			}
		}
		return false
	})
	if _, ended := o.endedWith(rerun.ID); !ended {
		t.Errorf("re-run %s recorded succeeded without running the handler", rerun.ID)
	}
}
