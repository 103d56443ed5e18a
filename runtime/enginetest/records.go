package enginetest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/core"
)

// A paused schedule enqueues nothing: the slots that come due are recorded
// paused, with no task, and never run; the pause's reason and actor are
// kept. Resume runs the next slots, none of the paused ones.
func pauseAndResume(t *testing.T, h Harness) {
	ctx := context.Background()
	exec := &executions{}
	r := single(t, h, exec, registry.Schedule{Name: "tick", Expr: "* * * * * *"})
	waitFor(t, 10*time.Second, "runs before the pause", exec.ranAfter("tick", "", time.Time{}, 2))
	if err := r.rt.Pause(core.WithActor(ctx, "suite"), "tick", "the suite pauses it"); err != nil {
		t.Fatal(err)
	}
	pausedAt := time.Now()
	paused, err := r.rt.Paused(ctx)
	if p, ok := paused["tick"]; err != nil || !ok || p.Reason != "the suite pauses it" || p.Actor != "suite" || p.At.IsZero() {
		t.Errorf("Paused = %+v, %v; want tick's pause with its reason, actor and time", paused, err)
	}
	pausedRecords := func() []core.Record {
		hist, _ := r.rt.History(ctx, "tick", core.HistoryLimitDefault)
		var out []core.Record
		for _, rec := range hist {
			if rec.Outcome == core.OutcomePaused {
				out = append(out, rec)
			}
		}
		return out
	}
	waitFor(t, 10*time.Second, "three slots recorded paused", func() bool { return len(pausedRecords()) >= 3 })
	for _, rec := range pausedRecords() {
		if rec.TaskID() != "" || !rec.EnqueuedAt.IsZero() || rec.RecordedAt.IsZero() || rec.Manual {
			t.Errorf("paused record %+v: want no task, no enqueue time, a record time", rec)
		}
	}
	if c, err := r.rt.Monitor().Counters(ctx); err != nil || c["tick"].Paused < 3 {
		t.Errorf("counters say %d slots paused (%v); want at least 3", c["tick"].Paused, err)
	}
	if err := r.rt.Resume(ctx, "tick"); err != nil {
		t.Fatal(err)
	}
	resumedAt := time.Now()
	waitFor(t, 10*time.Second, "three slots after the resume", exec.ranAfter("tick", "", resumedAt, 3))
	if paused, err := r.rt.Paused(ctx); err != nil || len(paused) != 0 {
		t.Errorf("after Resume, Paused = %+v, %v; want none", paused, err)
	}
	// A slot enqueued as the pause was set may still run, and one due as
	// the resume lands may run; none between.
	for _, occ := range exec.scheduled("tick", "") {
		if occ.Slot.After(pausedAt.Add(time.Second)) && occ.Slot.Before(resumedAt.Add(-time.Second)) {
			t.Errorf("slot %s ran although it came due while paused", stamp(occ.Slot))
		}
	}
	for _, rec := range pausedRecords() {
		for _, occ := range exec.scheduled("tick", "") {
			if occ.Slot.Equal(rec.Slot) {
				t.Errorf("slot %s is recorded paused and ran", stamp(rec.Slot))
			}
		}
	}
	var resumed []registry.Occurrence
	for _, occ := range exec.scheduled("tick", "") {
		if occ.Slot.After(resumedAt) {
			resumed = append(resumed, occ)
		}
	}
	assertOncePerSlot(t, r.rt.Registry().Schedules()[0], resumed)
}

// Every execution ends in a record that says what happened: a panic is a
// failure with the panic's value, a run past its schedule's timeout is a
// failure that says so, and a failure retried is recorded as retrying,
// then as the retry's result, each attempt counted and reported.
func truthfulRecords(t *testing.T, h Harness) {
	ctx := context.Background()
	var flakyRuns atomic.Int32
	exec := &executions{}
	r := single(t, h, exec,
		registry.Schedule{Name: "panics", Expr: "17 3 * * *", MaxRetry: 0,
			Handler: func(context.Context, registry.Occurrence) error {
				var m map[string]int
				m["boom"]++ // assignment to entry in nil map
				return nil
			}},
		registry.Schedule{Name: "times-out", Expr: "17 3 * * *", MaxRetry: 0, Timeout: time.Second,
			Handler: func(ctx context.Context, _ registry.Occurrence) error {
				<-ctx.Done()
				return ctx.Err()
			}},
		registry.Schedule{Name: "flaky", Expr: "17 3 * * *", MaxRetry: 2,
			Handler: func(context.Context, registry.Occurrence) error {
				if flakyRuns.Add(1) == 1 {
					return errors.New("connection reset by peer")
				}
				return nil
			}},
		registry.Schedule{Name: "gives-up", Expr: "17 3 * * *", MaxRetry: 1,
			Handler: func(context.Context, registry.Occurrence) error { return errors.New("still broken") }},
	)
	var mu sync.Mutex
	events := map[string][]core.Outcome{}
	r.rt.Observe(func(e core.Event) {
		if e.Manual && e.Outcome == core.OutcomeEnqueued {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		events[e.Schedule] = append(events[e.Schedule], e.Outcome)
	})
	for _, s := range r.rt.Registry().Schedules() {
		if _, err := r.rt.Trigger(ctx, s.Name, ""); err != nil {
			t.Fatal(err)
		}
	}
	last := func(name string) core.Record {
		h, _ := r.rt.History(ctx, name, 1)
		if len(h) == 0 {
			return core.Record{}
		}
		return h[0]
	}
	for name, want := range map[string]core.Outcome{
		"panics": core.OutcomeFailed, "times-out": core.OutcomeFailed,
		"flaky": core.OutcomeSucceeded, "gives-up": core.OutcomeFailed,
	} {
		waitFor(t, 15*time.Second, name+" to be recorded "+string(want), func() bool { return last(name).Outcome == want })
	}
	if rec := last("panics"); !strings.Contains(rec.Error, "panic") || !strings.Contains(rec.Error, "assignment to entry in nil map") {
		t.Errorf("the panic's record says %q; want the panic and its value", rec.Error)
	}
	if rec := last("times-out"); !strings.HasPrefix(rec.Error, "timeout after 1s") || rec.FinishedAt.IsZero() {
		t.Errorf("the timed-out handler's record: %q finished %v; want a timeout with its end time", rec.Error, rec.FinishedAt)
	}
	if rec := last("flaky"); rec.Attempt != 1 || rec.Error != "" {
		t.Errorf("flaky's record: attempt %d, error %q; want the successful retry, attempt 1, no error", rec.Attempt, rec.Error)
	}
	if rec := last("gives-up"); rec.Attempt != 1 || rec.MaxRetry != 1 || rec.Error != "still broken" {
		t.Errorf("gives-up's record: attempt %d of %d, %q; want the last attempt, 1 of 1, and its error", rec.Attempt, rec.MaxRetry, rec.Error)
	}
	counters, err := r.rt.Monitor().Counters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		succeeded, failed int64
		events            []core.Outcome
	}{
		"panics":    {0, 1, []core.Outcome{core.OutcomeFailed}},
		"times-out": {0, 1, []core.Outcome{core.OutcomeFailed}},
		"flaky":     {1, 1, []core.Outcome{core.OutcomeRetrying, core.OutcomeSucceeded}},
		"gives-up":  {0, 2, []core.Outcome{core.OutcomeRetrying, core.OutcomeFailed}},
	}
	mu.Lock()
	defer mu.Unlock()
	for name, w := range want {
		if c := counters[name]; c.Succeeded != w.succeeded || c.Failed != w.failed {
			t.Errorf("%s's counters: succeeded %d, failed %d; want %d, %d", name, c.Succeeded, c.Failed, w.succeeded, w.failed)
		}
		if got := events[name]; !slices.Equal(got, w.events) {
			t.Errorf("%s's attempts were reported as %v; want %v", name, got, w.events)
		}
	}
}
