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
	mu      sync.Mutex
	running int
	most    int
	runs    []registry.Occurrence
	ended   map[string]error // by occurrence ID
}

func newOverrunner() *overrunner {
	return &overrunner{release: make(chan struct{}), ended: map[string]error{}}
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
	r := single(t, h, nil, registry.Schedule{Name: "overruns", Expr: "* * * * * *", Overlap: registry.OverlapBufferOne,
		MaxRetry: 0, Timeout: time.Minute, Handler: o.handler})
	waitFor(t, 10*time.Second, "the first run", func() bool { return len(o.started()) >= 1 })
	first := o.started()[0]
	waitFor(t, 10*time.Second, "one slot buffered and two skipped behind the running one", func() bool {
		return len(byOutcome(t, r.rt, "overruns", core.OutcomeBuffered)) == 1 &&
			len(byOutcome(t, r.rt, "overruns", core.OutcomeSkipped)) >= 2
	})
	buffered := byOutcome(t, r.rt, "overruns", core.OutcomeBuffered)[0]
	skipped := byOutcome(t, r.rt, "overruns", core.OutcomeSkipped)
	if n := len(o.started()); n != 1 {
		t.Fatalf("%d runs while the first still ran, want 1 (the buffered slot must wait)", n)
	}
	if !buffered.Slot.After(first.Slot) || !skipped[0].Slot.After(buffered.Slot) {
		t.Errorf("first run %s, buffered %s, first skipped %s: want them in that order",
			stamp(first.Slot), stamp(buffered.Slot), stamp(skipped[0].Slot))
	}
	close(o.release)
	waitFor(t, 10*time.Second, "the buffered slot to run once the first ended", func() bool { return len(o.started()) >= 2 })
	r.stop()
	runs := o.started()
	if !runs[1].Slot.Equal(buffered.Slot) {
		t.Errorf("second run is of slot %s, want the buffered slot %s", stamp(runs[1].Slot), stamp(buffered.Slot))
	}
	for _, run := range runs {
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
		for _, rec := range byOutcome(t, r.rt, "overruns", core.OutcomeSucceeded) {
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
	r := single(t, h, nil, registry.Schedule{Name: "overruns", Expr: "* * * * * *", Overlap: registry.OverlapReplace,
		MaxRetry: 2, Timeout: time.Minute, Handler: o.handler})
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
}
