package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
	"github.com/hibiken/asynq"
)

// Every execution ends in a true record, against real Redis and real asynq
// workers: a panic and a run past the timeout are failures with their
// cause, a retried failure shows as retrying and then as its final result,
// and every attempt is counted.
func TestEveryExecutionEndsInATrueRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := sharedRedis(t)
	queue := uniq("q")
	release := make(chan struct{})
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	returned := make(chan struct{})
	var flakyRuns atomic.Int32
	noop := func(context.Context, registry.Occurrence) error { return nil }
	reg := registry.MustNew(
		registry.Schedule{Name: "ok", Expr: "17 3 * * *", Queue: queue, Handler: noop},
		registry.Schedule{Name: "panics", Expr: "17 3 * * *", Queue: queue, MaxRetry: 0,
			Handler: func(context.Context, registry.Occurrence) error {
				var m map[string]int
				m["boom"]++ // assignment to entry in nil map
				return nil
			}},
		registry.Schedule{Name: "hangs", Expr: "17 3 * * *", Queue: queue, MaxRetry: 0, Timeout: time.Second,
			Handler: func(context.Context, registry.Occurrence) error {
				<-release // ignores its context
				close(returned)
				return nil
			}},
		registry.Schedule{Name: "flaky", Expr: "17 3 * * *", Queue: queue, MaxRetry: 2,
			Handler: func(context.Context, registry.Occurrence) error {
				if flakyRuns.Add(1) == 1 {
					return errors.New("connection reset by peer")
				}
				return nil
			}},
		registry.Schedule{Name: "gives-up", Expr: "17 3 * * *", Queue: queue, MaxRetry: 1,
			Handler: func(context.Context, registry.Occurrence) error { return errors.New("still broken") }},
	)
	rt, err := runtime.New(reg, runtime.Options{Redis: rdb, Namespace: uniq("ns"), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	startWorker(t, rdb, queue, func(mux *asynq.ServeMux) { rt.RegisterHandlers(mux) })
	for _, s := range reg.Schedules() {
		if _, err := rt.Trigger(ctx, s.Name, ""); err != nil {
			t.Fatal(err)
		}
	}
	last := func(name string) runtime.Record {
		h, _ := rt.History(ctx, name, 1)
		if len(h) == 0 {
			return runtime.Record{}
		}
		return h[0]
	}
	for name, want := range map[string]runtime.Outcome{
		"ok": runtime.OutcomeSucceeded, "panics": runtime.OutcomeFailed, "hangs": runtime.OutcomeFailed,
		"flaky": runtime.OutcomeSucceeded, "gives-up": runtime.OutcomeFailed,
	} {
		waitFor(t, 10*time.Second, name+" to end "+string(want), func() bool { return last(name).Outcome == want })
	}
	if rec := last("panics"); !strings.Contains(rec.Error, "panic: assignment to entry in nil map") || !strings.Contains(rec.Error, "records_test.go") {
		t.Errorf("the panic's record says %q; want the panic value and where it happened", rec.Error)
	}
	if rec := last("hangs"); !strings.HasPrefix(rec.Error, "timeout after 1s") || rec.FinishedAt.IsZero() {
		t.Errorf("the hung handler's record: %q finished %v; want a timeout with its end time", rec.Error, rec.FinishedAt)
	}
	if rec := last("flaky"); rec.Attempt != 1 || rec.Error != "" {
		t.Errorf("flaky's record: attempt %d, error %q; want the successful retry, attempt 1, no error", rec.Attempt, rec.Error)
	}
	if rec := last("gives-up"); rec.Attempt != 1 || rec.MaxRetry != 1 || rec.Error != "still broken" {
		t.Errorf("gives-up's record: attempt %d of %d, %q; want the last attempt 1 of 1", rec.Attempt, rec.MaxRetry, rec.Error)
	}
	// A handler that returns after its timeout must not turn the failure
	// into a success.
	releaseOnce.Do(func() { close(release) })
	<-returned
	if rec := last("hangs"); rec.Outcome != runtime.OutcomeFailed {
		t.Errorf("after the hung handler returned, its record says %s", rec.Outcome)
	}
	counters, err := rt.Monitor().Counters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][2]int64{ // succeeded, failed attempts
		"ok": {1, 0}, "panics": {0, 1}, "hangs": {0, 1}, "flaky": {1, 1}, "gives-up": {0, 2},
	} {
		if c := counters[name]; c.Succeeded != want[0] || c.Failed != want[1] {
			t.Errorf("%s: succeeded %d, failed %d; want %d, %d", name, c.Succeeded, c.Failed, want[0], want[1])
		}
	}
	if c := counters["ok"]; c.LastSuccess.IsZero() || !c.LastSlotSuccess.IsZero() {
		t.Errorf("a run now's success: last success %v, last slot success %v; want only the first set", c.LastSuccess, c.LastSlotSuccess)
	}
	snap, _ := rt.Monitor().Snapshot(ctx)
	for _, st := range snap.Schedules {
		want := runtime.StatusFailing
		if st.Schedule.Name == "ok" || st.Schedule.Name == "flaky" {
			want = runtime.StatusOK
		}
		if st.Status != want {
			t.Errorf("%s: status %s, want %s", st.Schedule.Name, st.Status, want)
		}
	}
}

// A pause holds across a leader change; slots due meanwhile are recorded
// paused and never run, and resume runs the next slot without a backfill.
func TestPauseHoldsAcrossTakeoverAndResumeDoesNotBackfill(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := sharedRedis(t)
	c := newCluster(t, rdb, 2, runtime.Options{}, registry.Schedule{Name: "tick", Expr: "* * * * * *"})
	waitFor(t, 10*time.Second, "runs before the pause", func() bool { return len(c.executed.slots("tick")) >= 2 })
	leader := c.leaderIndex(t)
	rt := c.rts[1-leader] // any replica may pause
	if err := rt.Pause(runtime.WithActor(ctx, "alice"), "tick", "the database is being migrated"); err != nil {
		t.Fatal(err)
	}
	pausedAt := time.Now()
	pausedCount := func() int64 { counters, _ := rt.Monitor().Counters(ctx); return counters["tick"].Paused }
	waitFor(t, 10*time.Second, "slots recorded paused", func() bool { return pausedCount() >= 2 })
	snap, _ := rt.Monitor().Snapshot(ctx)
	if st := snap.Schedules[0]; st.Status != runtime.StatusPaused || st.Paused == nil ||
		st.Paused.Reason != "the database is being migrated" || st.Paused.Actor != "alice" || st.Paused.At.IsZero() {
		t.Errorf("while paused the snapshot says status %s, pause %+v", st.Status, st.Paused)
	}
	// The leader shuts down; the other replica takes over, still paused.
	c.cancels[leader]()
	waitFor(t, 10*time.Second, "the other replica to lead", c.rts[1-leader].Leadership().Leading)
	before := pausedCount()
	waitFor(t, 10*time.Second, "the new leader to record paused slots", func() bool { return pausedCount() >= before+2 })
	if err := rt.Resume(runtime.WithActor(ctx, "alice"), "tick"); err != nil {
		t.Fatal(err)
	}
	resumedAt := time.Now()
	waitFor(t, 10*time.Second, "runs after the resume", func() bool {
		for slot := range c.executed.slots("tick") {
			if time.Unix(slot, 0).After(resumedAt) {
				return true
			}
		}
		return false
	})
	// A slot already enqueued when the pause was set may still run; none
	// due after that may, and resume runs none of them late.
	for slot := range c.executed.slots("tick") {
		at := time.Unix(slot, 0)
		if at.After(pausedAt.Add(time.Second)) && at.Before(resumedAt.Add(-time.Second)) {
			t.Errorf("slot %s ran although it came due while paused", at.UTC())
		}
	}
	hist, _ := rt.History(ctx, "tick", 50)
	paused := 0
	for _, r := range hist {
		if r.Outcome == runtime.OutcomePaused {
			paused++
			// Never enqueued: no task, no enqueue time.
			if r.TaskID() != "" || !r.EnqueuedAt.IsZero() || r.RecordedAt.IsZero() {
				t.Errorf("a paused record has task %q, enqueued at %v, recorded at %v; want no task, no enqueue time, its record time",
					r.TaskID(), r.EnqueuedAt, r.RecordedAt)
			}
		}
	}
	if paused < 4 {
		t.Errorf("history has %d paused records, want every paused slot (at least 4)", paused)
	}
	snap, _ = rt.Monitor().Snapshot(ctx)
	if st := snap.Schedules[0]; st.Paused != nil || st.Status == runtime.StatusLate || st.Status == runtime.StatusPaused {
		t.Errorf("after resume: status %s, pause %+v", st.Status, st.Paused)
	}
}

// A pause and its resume while no replica leads (all down, or cut off from
// Redis): the leader that comes back within grace records the slots due
// during the pause as paused and runs none of them, as a leader during the
// pause would have; the slots after the resume run.
func TestSlotsDueDuringAPauseNoLeaderSawAreNotRunAfterTheResume(t *testing.T) {
	t.Parallel()
	pauseWhileNoneLeads(t, pauseCase{pauses: 1})
}

// Two pauses, each resumed, while no replica leads: the slots of both are
// recorded paused, not only those of the last one.
func TestSlotsDueDuringTwoPausesNoLeaderSawAreNotRun(t *testing.T) {
	t.Parallel()
	pauseWhileNoneLeads(t, pauseCase{pauses: 2})
}

// A pause whose reason changes (the schedule paused again) while no
// replica leads still counts from its start: the slots before the second
// pause stay paused too, and the pause shows when it began.
func TestAPausePausedAgainCountsFromItsStart(t *testing.T) {
	t.Parallel()
	pauseWhileNoneLeads(t, pauseCase{pauses: 1, repause: true})
}

// A family paused and resumed while no replica leads: its members' slots
// due during the pause are not run either.
func TestAFamilysSlotsDueDuringAPauseNoLeaderSawAreNotRun(t *testing.T) {
	t.Parallel()
	pauseWhileNoneLeads(t, pauseCase{pauses: 1, family: true})
}

// pauseCase is how pauseWhileNoneLeads pauses: how many times, whether
// it pauses again midway, and whether tick is a family (of one member).
type pauseCase struct {
	pauses          int
	repause, family bool
}

// pauseWhileNoneLeads pauses and resumes the schedule tick `pauses` times,
// a few slots apart (pausing it again midway when repause), while no
// replica leads, then starts a leader and checks that no slot due during a
// pause ran and that they are recorded.
func pauseWhileNoneLeads(t *testing.T, c pauseCase) {
	ctx := context.Background()
	rdb := sharedRedis(t)
	ns, queue := uniq("ns"), uniq("q")
	exec := newExecutions()
	s := registry.Schedule{Name: "tick", Expr: "* * * * * *", Queue: queue, Handler: exec.handler}
	if c.family {
		s.Per = "tenant"
	}
	reg := registry.MustNew(s)
	opts := runtime.Options{Redis: rdb, Namespace: ns, LeaseTTL: time.Second, Grace: time.Minute, Logger: testLogger(t)}
	first, err := runtime.New(reg, opts)
	if err != nil {
		t.Fatal(err)
	}
	startWorker(t, rdb, queue, func(mux *asynq.ServeMux) { first.RegisterHandlers(mux) })
	if c.family {
		if err := first.Families().SetMany(ctx, "tick", []runtime.Member{{Key: "acme"}}); err != nil {
			t.Fatal(err)
		}
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { first.Run(runCtx); close(done) }()
	waitFor(t, 10*time.Second, "runs before the pause", func() bool { return len(exec.slots("tick")) >= 2 })
	stop()
	<-done

	var windows [][2]time.Time
	for i := range c.pauses {
		if i > 0 {
			resumed := windows[i-1][1]
			waitFor(t, 10*time.Second, "slots to come due between the pauses", func() bool { return time.Since(resumed) > 2*time.Second })
		}
		if err := first.Pause(ctx, "tick", "maintenance"); err != nil {
			t.Fatal(err)
		}
		pausedAt := time.Now()
		if c.repause {
			waitFor(t, 10*time.Second, "two slots to come due while paused", func() bool { return time.Since(pausedAt) > 2*time.Second })
			before, err := first.Paused(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := first.Pause(ctx, "tick", "maintenance, longer"); err != nil {
				t.Fatal(err)
			}
			after, err := first.Paused(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if p := after["tick"]; !p.At.Equal(before["tick"].At) || p.Reason != "maintenance, longer" {
				t.Errorf("paused again: %+v, want the new reason and the first pause's time %s", p, before["tick"].At)
			}
		}
		waitFor(t, 10*time.Second, "three slots to come due while paused", func() bool { return time.Since(pausedAt) > 3*time.Second })
		if err := first.Resume(ctx, "tick"); err != nil {
			t.Fatal(err)
		}
		windows = append(windows, [2]time.Time{pausedAt, time.Now()})
	}
	first.Close()

	second, err := runtime.New(reg, opts)
	if err != nil {
		t.Fatal(err)
	}
	runUntilTheEnd(t, second)
	resumedAt := windows[len(windows)-1][1]
	waitFor(t, 10*time.Second, "runs after the resume", func() bool {
		for slot := range exec.slots("tick") {
			if time.Unix(slot, 0).After(resumedAt.Add(time.Second)) {
				return true
			}
		}
		return false
	})
	for slot := range exec.slots("tick") {
		for _, w := range windows {
			if at := time.Unix(slot, 0); !at.Before(w[0].Add(time.Second)) && at.Before(w[1]) {
				t.Errorf("slot %s ran although it came due while paused", at.UTC())
			}
		}
	}
	waitFor(t, 10*time.Second, "the paused slots' records", func() bool {
		hist, _ := second.History(ctx, "tick", 50)
		paused := 0
		for _, r := range hist {
			if r.Outcome == runtime.OutcomePaused {
				paused++
			}
		}
		return paused >= 3*c.pauses
	})
}

// Re-running a past slot gives the handler that slot and the scheduled
// occurrence's key, whether the original failed (and was archived) or
// succeeded; a double submit runs once; only real past slots are accepted;
// a backfill re-runs each slot of its range, up to the cap.
func TestRerunAPastSlotAndBackfill(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := sharedRedis(t)
	queue := uniq("q")
	var mu sync.Mutex
	type run struct {
		slot   time.Time
		key    string
		manual bool
	}
	var runs []run
	effects := map[string]int{} // what an idempotent handler did, by occ.Key()
	handler := func(_ context.Context, occ registry.Occurrence) error {
		mu.Lock()
		defer mu.Unlock()
		runs = append(runs, run{occ.Slot, occ.Key(), occ.Manual})
		if !occ.Manual {
			return errors.New("the night's run failed")
		}
		if effects[occ.Key()] == 0 {
			effects[occ.Key()]++
		}
		return nil
	}
	reg := registry.MustNew(registry.Schedule{Name: "prune", Expr: "17 3 * * *", Zone: "Europe/London", Queue: queue, MaxRetry: 0, Handler: handler})
	s := reg.Schedules()[0]
	rt, err := runtime.New(reg, runtime.Options{Redis: rdb, Namespace: uniq("ns"), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	startWorker(t, rdb, queue, func(mux *asynq.ServeMux) { rt.RegisterHandlers(mux) })
	runCount := func() int { mu.Lock(); defer mu.Unlock(); return len(runs) }

	// Last night's scheduled occurrence failed and was archived.
	lastNight := s.Prev(time.Now())
	scheduledID := registry.Scope{Namespace: rt.Namespace(), Schedule: "prune"}.ID(lastNight)
	if err := rt.Enqueue(ctx, s.Occurrence(rt.Namespace(), lastNight)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the scheduled run to fail", func() bool { return runCount() == 1 })

	occ, err := rt.Rerun(runtime.WithActor(ctx, "alice"), "prune", lastNight, "rerun-1")
	if err != nil {
		t.Fatal(err)
	}
	if again, err := rt.Rerun(ctx, "prune", lastNight, "rerun-1"); err != nil || again.ID != occ.ID {
		t.Fatalf("double submit: %v %v, want the same occurrence %s", again.ID, err, occ.ID)
	}
	waitFor(t, 10*time.Second, "the re-run", func() bool { return runCount() == 2 })
	mu.Lock()
	got := runs[1]
	mu.Unlock()
	if !got.slot.Equal(lastNight) || got.slot.Location().String() != "Europe/London" || got.key != scheduledID || !got.manual {
		t.Errorf("the re-run saw slot %s key %s manual %v; want last night's slot %s in London and its scheduled key", got.slot, got.key, got.manual, lastNight)
	}
	if occ.ID == scheduledID {
		t.Error("the re-run has the scheduled occurrence's task ID, which asynq would refuse")
	}
	// Re-running the slot that now succeeded does nothing more to an
	// idempotent handler.
	if _, err := rt.Rerun(ctx, "prune", lastNight, "rerun-2"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the second re-run", func() bool { return runCount() == 3 })
	mu.Lock()
	if n := effects[scheduledID]; n != 1 {
		t.Errorf("the night's work was done %d times, want 1", n)
	}
	mu.Unlock()
	waitFor(t, 10*time.Second, "the re-run's record", func() bool {
		h, _ := rt.History(ctx, "prune", 10)
		for _, r := range h {
			if r.ID == occ.ID {
				return r.Outcome == runtime.OutcomeSucceeded && r.Manual && r.Slot.Equal(lastNight) && r.Actor == "alice"
			}
		}
		return false
	})

	if c, _ := rt.Monitor().Counters(ctx); c["prune"].LastSlotSuccess.IsZero() {
		t.Error("a re-run's success did not count as the slot's own")
	}
	var notASlot *runtime.NotASlotError
	if _, err := rt.Rerun(ctx, "prune", lastNight.Add(time.Minute), ""); !errors.As(err, &notASlot) ||
		!notASlot.Before.Equal(lastNight) || !notASlot.After.Equal(s.Next(lastNight)) || !errors.Is(err, runtime.ErrNotASlot) {
		t.Errorf("re-run of 03:18: %v; want ErrNotASlot naming %s and %s", err, lastNight, s.Next(lastNight))
	}
	if _, err := rt.Rerun(ctx, "prune", s.Next(time.Now()), ""); !errors.As(err, &notASlot) || !notASlot.Future {
		t.Errorf("re-run of a future slot: %v, want ErrNotASlot (future)", err)
	}

	before := runCount()
	occs, err := rt.Backfill(ctx, "prune", lastNight.AddDate(0, 0, -3), lastNight.AddDate(0, 0, -1), "fill")
	if err != nil || len(occs) != 3 {
		t.Fatalf("backfill of three nights: %d occurrences, %v", len(occs), err)
	}
	waitFor(t, 10*time.Second, "three backfilled runs", func() bool { return runCount() == before+3 })
	if _, err := rt.Backfill(ctx, "prune", lastNight.AddDate(0, 0, -200), lastNight, ""); !errors.Is(err, runtime.ErrTooManySlots) {
		t.Errorf("backfill of 200 nights: %v, want ErrTooManySlots", err)
	}
	if _, err := rt.Backfill(ctx, "prune", lastNight, lastNight.Add(-time.Hour), ""); !errors.Is(err, runtime.ErrBadRange) {
		t.Errorf("backfill of a reversed range: %v, want ErrBadRange", err)
	}
}

// A schedule whose queue no worker listens to is named in the log,
// the snapshot and the health, instead of only turning late.
func TestAQueueNoWorkerServesIsReported(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := sharedRedis(t)
	var logs syncBuffer
	served, lonely := uniq("q"), uniq("lonely")
	noop := func(context.Context, registry.Occurrence) error { return nil }
	reg := registry.MustNew(registry.Schedule{Name: "served", Expr: "* * * * * *", Queue: served, Handler: noop},
		registry.Schedule{Name: "forgotten", Expr: "* * * * * *", Queue: lonely, Handler: noop})
	rt, err := runtime.New(reg, runtime.Options{Redis: rdb, Namespace: uniq("ns"), LeaseTTL: 2 * time.Second,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	startWorker(t, rdb, served, func(mux *asynq.ServeMux) { rt.RegisterHandlers(mux) })
	// asynq's server announces its queues a moment after it starts; until
	// then its queue is rightly unserved.
	waitFor(t, 10*time.Second, "the worker to announce its queue", func() bool {
		queues, _ := rt.Redis().UnservedQueues()
		return len(queues) == 1
	})
	runUntilTheEnd(t, rt)
	// The core's words name no engine; the Redis engine's advice says
	// what to change (engine.Queues.ServeAdvice).
	const warning = "no worker serves this queue: its occurrences are enqueued but never run; start workers with asynq.Config.Queues including it"
	waitFor(t, 10*time.Second, "the warning", func() bool { return strings.Contains(logs.String(), warning) })
	if n := strings.Count(logs.String(), warning); n != 1 || !strings.Contains(logs.String(), lonely) ||
		strings.Contains(logs.String(), "queue="+served) {
		t.Errorf("logged %d warnings, want one naming only %s:\n%s", n, lonely, logs.String())
	}
	snap, _ := rt.Monitor().Snapshot(ctx)
	if len(snap.Unserved) != 1 || snap.Unserved[0] != lonely {
		t.Errorf("snapshot unserved %v, want [%s]", snap.Unserved, lonely)
	}
	if h := rt.Health(ctx); h.Status != "unhealthy" || len(h.Unserved) != 1 || !strings.Contains(strings.Join(h.Problems, "\n"), "no worker serves 1 queue: "+lonely) {
		t.Errorf("health %+v, want unhealthy naming the unserved queue", h)
	}
}

// Two processes started with one Replica name: each says so in health and
// the snapshot.
// A queue no worker serves that holds thousands of schedules is reported
// in one line of bounded length: ten names and how many more.
func TestAnUnservedQueueOfManySchedulesIsLoggedInOneShortLine(t *testing.T) {
	t.Parallel()
	rdb := sharedRedis(t)
	var logs syncBuffer
	lonely := uniq("lonely")
	noop := func(context.Context, registry.Occurrence) error { return nil }
	scheds := make([]registry.Schedule, 5000)
	for i := range scheds {
		scheds[i] = registry.Schedule{Name: fmt.Sprintf("nightly-%04d", i), Expr: "0 3 * * *", Queue: lonely, Handler: noop}
	}
	rt, err := runtime.New(registry.MustNew(scheds...), runtime.Options{Redis: rdb, Namespace: uniq("ns"), LeaseTTL: 2 * time.Second,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	runUntilTheEnd(t, rt)
	waitFor(t, 10*time.Second, "the warning", func() bool { return strings.Contains(logs.String(), "no worker serves this queue") })
	for line := range strings.SplitSeq(logs.String(), "\n") {
		if !strings.Contains(line, "no worker serves this queue") {
			continue
		}
		if len(line) > 600 || !strings.Contains(line, "nightly-0009") || strings.Contains(line, "nightly-0010") ||
			!strings.Contains(line, "more_schedules=4990") {
			t.Errorf("the warning is %d bytes, want ten names and more_schedules=4990:\n%.600s", len(line), line)
		}
	}
}

func TestADuplicateReplicaNameIsReported(t *testing.T) {
	t.Parallel()
	rdb := sharedRedis(t)
	c := newCluster(t, rdb, 2, runtime.Options{LeaseTTL: time.Second, Replica: "same-name"}, idleSchedule())
	for _, rt := range c.rts {
		waitFor(t, 10*time.Second, "the duplicate name to be noticed", func() bool {
			return strings.Contains(rt.Redis().DuplicateReplica(), `"same-name" is used by two processes`)
		})
		if h := rt.Health(context.Background()); h.Status != "unhealthy" {
			t.Errorf("health %+v, want unhealthy naming the duplicate", h)
		}
	}
}
