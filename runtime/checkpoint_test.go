package runtime_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
	"github.com/belfry/belfry/runtime/checkpoint"
	"github.com/hibiken/asynq"
)

// items is a run over n items, batch at a time, counting how often each
// item was processed.
type items struct {
	n, batch int
	pause    time.Duration // per batch
	mu       sync.Mutex
	seen     map[int]int
	batches  atomic.Int64
	// failAt, when > 0, fails the batch that reaches it, once.
	failAt int
	failed atomic.Bool
}

func newItems(n, batch int, pause time.Duration) *items {
	return &items{n: n, batch: batch, pause: pause, seen: map[int]int{}}
}

func (it *items) handler(ctx context.Context, occ registry.Occurrence) error {
	return checkpoint.Run(ctx, func(ctx context.Context, cursor string) (string, bool, error) {
		from := 0
		if cursor != "" {
			from, _ = strconv.Atoi(cursor)
		}
		to := min(from+it.batch, it.n)
		if it.failAt > 0 && from < it.failAt && it.failAt <= to && !it.failed.Swap(true) {
			return "", false, errors.New("the batch failed")
		}
		select {
		case <-time.After(it.pause):
		case <-ctx.Done():
			return "", false, ctx.Err()
		}
		it.mu.Lock()
		for i := from; i < to; i++ {
			it.seen[i]++
		}
		it.mu.Unlock()
		it.batches.Add(1)
		checkpoint.Add(ctx, int64(to-from))
		checkpoint.SetTotal(ctx, int64(it.n))
		return strconv.Itoa(to), to == it.n, nil
	})
}

// counts returns how many items were processed at least once, and the
// most times one was.
func (it *items) counts() (done, most int) {
	it.mu.Lock()
	defer it.mu.Unlock()
	for _, c := range it.seen {
		done++
		most = max(most, c)
	}
	return done, most
}

// twice is how many items were processed more than once.
func (it *items) twice() int {
	it.mu.Lock()
	defer it.mu.Unlock()
	n := 0
	for _, c := range it.seen {
		if c > 1 {
			n++
		}
	}
	return n
}

// checkpointed is a runtime whose schedule "long" runs h, with workers
// started by the caller.
func checkpointed(t *testing.T, s registry.Schedule) (*runtime.Runtime, string) {
	t.Helper()
	queue := uniq("q")
	s.Name, s.Expr, s.Queue = "long", "17 3 * * *", queue
	reg, err := registry.New(s)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := runtime.New(reg, runtime.Options{Redis: sharedRedis(t), Namespace: uniq("ns"), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt, queue
}

func lastRecord(t *testing.T, rt *runtime.Runtime, id string) runtime.Record {
	t.Helper()
	hist, err := rt.History(context.Background(), "long", 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range hist {
		if r.ID == id {
			return r
		}
	}
	return runtime.Record{}
}

// A run longer than its timeout stops before it, saves, and continues in
// new tasks of the same occurrence: recorded continued, never failed, and
// finished with every item processed once, although retry=0 leaves it no
// retry at all.
func TestCheckpointedRunLongerThanItsTimeoutContinues(t *testing.T) {
	t.Parallel()
	// 100 batches, about 6 s of work, in runs of 2 s: a margin before each
	// deadline (a quarter of the timeout at least) that a busy CI host's
	// stalls do not eat, as they did a 1 s timeout's, where a batch that
	// overran the deadline failed the run (retry=0 leaves it none).
	it := newItems(3000, 30, 60*time.Millisecond)
	rt, queue := checkpointed(t, registry.Schedule{Timeout: 2 * time.Second, MaxRetry: 0, Handler: it.handler})
	var continued atomic.Int64 // what the metrics count
	rt.Observe(func(e runtime.Event) {
		if e.Outcome == runtime.OutcomeContinued {
			continued.Add(1)
		}
	})
	var outcomes sync.Map
	startWorker(t, sharedRedis(t), queue, func(mux *asynq.ServeMux) {
		rt.RegisterHandlers(mux, func(s *registry.Schedule, next registry.HandlerFunc) registry.HandlerFunc {
			return func(ctx context.Context, occ registry.Occurrence) error {
				err := next(ctx, occ)
				var in *checkpoint.Interrupted
				if errors.As(err, &in) {
					outcomes.Store(in.Cursor, in.Reason)
				}
				return err
			}
		})
	})
	occ, err := rt.Trigger(context.Background(), "long", "")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "every item processed", func() bool { done, _ := it.counts(); return done == it.n })
	waitFor(t, 5*time.Second, "the occurrence recorded succeeded", func() bool {
		return lastRecord(t, rt, occ.ID).Outcome == runtime.OutcomeSucceeded
	})
	if _, most := it.counts(); most != 1 {
		t.Errorf("an item was processed %d times; want each once", most)
	}
	n := 0
	outcomes.Range(func(_, reason any) bool {
		n++
		if reason != "timeout" {
			t.Errorf("interrupted for %v, want timeout", reason)
		}
		return true
	})
	if n < 2 {
		t.Errorf("%d interruptions; a run of about 6 s with a 2 s timeout needs at least 2", n)
	}
	if got := continued.Load(); got != int64(n) {
		t.Errorf("%d continued events for %d interruptions", got, n)
	}
	rec := lastRecord(t, rt, occ.ID)
	if rec.Progress == nil || rec.Progress.Resumptions < int64(n) || rec.Progress.Items != int64(it.n) || !rec.Progress.Done {
		t.Errorf("record's progress = %+v, want done, %d items, at least %d resumptions", rec.Progress, it.n, n)
	}
	if rec.Attempt != 0 {
		t.Errorf("record's attempt = %d; continuations must not use retries", rec.Attempt)
	}
}

// A failed batch is retried from the last saved cursor: no batch before
// it runs again.
func TestCheckpointedRetryResumesFromTheLastSave(t *testing.T) {
	t.Parallel()
	it := newItems(400, 20, time.Millisecond)
	it.failAt = 250
	rt, queue := checkpointed(t, registry.Schedule{Timeout: time.Minute, MaxRetry: 2, Handler: it.handler})
	startWorker(t, sharedRedis(t), queue, func(mux *asynq.ServeMux) { rt.RegisterHandlers(mux) })
	occ, err := rt.Trigger(context.Background(), "long", "")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the occurrence recorded succeeded", func() bool {
		return lastRecord(t, rt, occ.ID).Outcome == runtime.OutcomeSucceeded
	})
	if done, most := it.counts(); done != it.n || most != 1 {
		t.Errorf("%d items processed, one of them %d times; want %d, each once", done, most, it.n)
	}
	if rec := lastRecord(t, rt, occ.ID); rec.Attempt != 1 {
		t.Errorf("record's attempt = %d, want 1 (the retry)", rec.Attempt)
	}
}

// A worker's shutdown mid-run: asynq cancels the handler at its
// ShutdownTimeout and requeues the task; the handler saves its place, and
// another worker finishes the run from there.
func TestCheckpointedRunContinuesAfterAWorkerShutdown(t *testing.T) {
	t.Parallel()
	it := newItems(2000, 20, 20*time.Millisecond)
	rt, queue := checkpointed(t, registry.Schedule{Timeout: time.Minute, MaxRetry: 0, Handler: it.handler})
	rdb := sharedRedis(t)
	first := startWorkerWith(t, rdb, queue, func(mux *asynq.ServeMux) { rt.RegisterHandlers(mux) },
		workerConfig{Concurrency: 1, RetryDelay: time.Millisecond, ShutdownTimeout: 100 * time.Millisecond})
	occ, err := rt.Trigger(context.Background(), "long", "")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "a few batches", func() bool { return it.batches.Load() >= 5 })
	first.Shutdown()
	waitFor(t, 10*time.Second, "the interruption recorded", func() bool {
		return lastRecord(t, rt, occ.ID).Outcome == runtime.OutcomeContinued
	})
	atShutdown, _ := it.counts()
	if atShutdown == it.n {
		t.Fatal("the run finished before the shutdown; the test proves nothing")
	}
	startWorker(t, rdb, queue, func(mux *asynq.ServeMux) { rt.RegisterHandlers(mux) })
	waitFor(t, 30*time.Second, "the occurrence recorded succeeded", func() bool {
		return lastRecord(t, rt, occ.ID).Outcome == runtime.OutcomeSucceeded
	})
	if done, _ := it.counts(); done != it.n {
		t.Errorf("%d items processed, want %d", done, it.n)
	}
	if twice := it.twice(); twice > it.batch {
		t.Errorf("%d items processed twice; at most one batch (%d) may be", twice, it.batch)
	}
	if rec := lastRecord(t, rt, occ.ID); rec.Attempt != 0 || rec.Progress == nil || rec.Progress.Resumptions < 1 {
		t.Errorf("record: attempt %d, progress %+v; want attempt 0 and a resumption", rec.Attempt, rec.Progress)
	}
}

// With resume=next, the occurrence after one whose last attempt failed
// first finishes the failed one's work from its cursor, then does its own:
// every item of the failed occurrence is processed once.
func TestResumeNextFinishesThePreviousOccurrencesWork(t *testing.T) {
	t.Parallel()
	const n, batch = 50, 10
	var mu sync.Mutex
	seen := map[string]map[int]int{} // by occurrence whose work it is
	byOcc := map[string]string{}     // the occurrence that did a batch, by the work's key and start
	first := ""
	handler := func(ctx context.Context, occ registry.Occurrence) error {
		return checkpoint.Run(ctx, func(ctx context.Context, cursor string) (string, bool, error) {
			b, _ := checkpoint.CurrentBatch(ctx)
			from, _ := strconv.Atoi(cursor)
			mu.Lock()
			defer mu.Unlock()
			if first == "" {
				first = occ.ID
			}
			if occ.ID == first && from == 30 {
				return "", false, errors.New("the first night gives up")
			}
			if seen[b.Key] == nil {
				seen[b.Key] = map[int]int{}
			}
			for i := from; i < from+batch; i++ {
				seen[b.Key][i]++
			}
			byOcc[b.Key+"@"+cursor] = occ.ID
			return strconv.Itoa(from + batch), from+batch == n, nil
		})
	}
	c := newCluster(t, sharedRedis(t), 1, runtime.Options{},
		registry.Schedule{Name: "nightly", Expr: "* * * * * *", MaxRetry: 0, Overlap: registry.OverlapSkip,
			Resume: registry.ResumeNext, Handler: handler})
	var firstID string
	waitFor(t, 20*time.Second, "the first occurrence's work finished by another", func() bool {
		mu.Lock()
		defer mu.Unlock()
		firstID = first
		return first != "" && len(seen[first]) == n
	})
	mu.Lock()
	for i := range n {
		if got := seen[firstID][i]; got != 1 {
			t.Errorf("item %d of the first occurrence processed %d times, want once", i, got)
		}
	}
	taker := byOcc[firstID+"@30"]
	mu.Unlock()
	if taker == "" || taker == firstID {
		t.Fatalf("the first occurrence's batch from 30 was done by %q, want the next occurrence", taker)
	}
	waitFor(t, 10*time.Second, "the first occurrence's record", func() bool {
		hist, err := c.rts[0].History(context.Background(), "nightly", 50)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range hist {
			if r.ID == firstID {
				return r.Outcome == runtime.OutcomeFailed && r.Progress != nil && r.Progress.Done
			}
		}
		return false
	})
}

// overlap=skip holds while a checkpointed occurrence goes on in
// continuation tasks: the slots that come due meanwhile are skipped, and
// no two occurrences ever run at once.
func TestOverlapSkipHoldsWhileAnOccurrenceContinues(t *testing.T) {
	t.Parallel()
	o := newOverlapRun(40) // about 2.4 s of work
	c := newCluster(t, sharedRedis(t), 1, runtime.Options{},
		registry.Schedule{Name: "long", Expr: "* * * * * *", Timeout: time.Second, MaxRetry: 0, Overlap: registry.OverlapSkip, Handler: o.handler})
	waitFor(t, 20*time.Second, "an occurrence to finish after continuing", func() bool { return len(o.finished()) > 0 })
	if m := o.most.Load(); m != 1 {
		t.Errorf("%d occurrences ran at once; overlap=skip allows one", m)
	}
	hist, err := c.rts[0].History(context.Background(), "long", 50)
	if err != nil {
		t.Fatal(err)
	}
	skipped, continued := 0, 0
	for _, r := range hist {
		switch r.Outcome {
		case runtime.OutcomeSkipped:
			skipped++
		case runtime.OutcomeContinued, runtime.OutcomeSucceeded:
			if r.Progress != nil && r.Progress.Resumptions > 0 {
				continued++
			}
		}
	}
	if skipped == 0 || continued == 0 {
		t.Errorf("%d skipped slots and %d continued occurrences in the history; want both", skipped, continued)
	}
}

// overlapRun is a checkpointed handler of batches batches of 60 ms each
// that notes the most occurrences running at once, the occurrences that
// ran to done, and the handler calls of each occurrence under way.
type overlapRun struct {
	batches      int
	active, most atomic.Int64
	mu           sync.Mutex
	done         map[string]bool
}

func newOverlapRun(batches int) *overlapRun {
	return &overlapRun{batches: batches, done: map[string]bool{}}
}

func (o *overlapRun) handler(ctx context.Context, occ registry.Occurrence) error {
	n := o.active.Add(1)
	defer o.active.Add(-1)
	for m := o.most.Load(); n > m && !o.most.CompareAndSwap(m, n); m = o.most.Load() {
	}
	err := checkpoint.Run(ctx, func(ctx context.Context, cursor string) (string, bool, error) {
		from, _ := strconv.Atoi(cursor)
		select {
		case <-time.After(60 * time.Millisecond):
		case <-ctx.Done():
			return "", false, ctx.Err()
		}
		return strconv.Itoa(from + 1), from+1 == o.batches, nil
	})
	if err == nil {
		o.mu.Lock()
		o.done[occ.ID] = true
		o.mu.Unlock()
	}
	return err
}

func (o *overlapRun) finished() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var ids []string
	for id := range o.done {
		ids = append(ids, id)
	}
	return ids
}

// overlap=skip holds for as long as the occurrence continues, also once
// its first task's retention is over and asynq has deleted it: the
// continuation running then is what the leader looks at.
func TestOverlapSkipHoldsPastTheFirstTasksRetention(t *testing.T) {
	t.Parallel()
	o := newOverlapRun(200) // several times the task retention (the lease TTL) and asynq's janitor period
	newCluster(t, sharedRedis(t), 1, runtime.Options{},
		registry.Schedule{Name: "long", Expr: "* * * * * *", Timeout: time.Second, MaxRetry: 0, Overlap: registry.OverlapSkip, Handler: o.handler})
	waitFor(t, 40*time.Second, "an occurrence to finish after continuing", func() bool {
		if m := o.most.Load(); m > 1 {
			t.Fatalf("%d occurrences ran at once; overlap=skip allows one", m)
		}
		return len(o.finished()) > 0
	})
	if m := o.most.Load(); m != 1 {
		t.Errorf("%d occurrences ran at once; overlap=skip allows one", m)
	}
}

// overlap=replace cancels an occurrence running in a continuation task:
// none of the replaced occurrences runs on to finish its work, and their
// records stay "replaced".
func TestOverlapReplaceCancelsAContinuingOccurrence(t *testing.T) {
	t.Parallel()
	o := newOverlapRun(70) // longer than the slots' period, in continuations of a second's timeout
	c := newCluster(t, sharedRedis(t), 1, runtime.Options{},
		registry.Schedule{Name: "long", Expr: "*/3 * * * * *", Timeout: time.Second, MaxRetry: 0, Overlap: registry.OverlapReplace, Handler: o.handler})
	replaced := func() []runtime.Record {
		hist, err := c.rts[0].History(context.Background(), "long", 50)
		if err != nil {
			t.Fatal(err)
		}
		var out []runtime.Record
		for _, r := range hist {
			if r.Outcome == runtime.OutcomeReplaced {
				out = append(out, r)
			}
		}
		return out
	}
	// The first replaced one, left running, would have done its work by
	// the time three were replaced.
	waitFor(t, 30*time.Second, "three occurrences replaced, or one to finish", func() bool {
		return len(replaced()) >= 3 || len(o.finished()) > 0
	})
	// Each occurrence is replaced before it can have done its work.
	for _, id := range o.finished() {
		t.Errorf("%s ran its work to done; overlap=replace cancelled it when the next slot came due", id)
	}
	for _, r := range replaced() {
		if _, ok := strings.CutPrefix(r.Error, "replaced by "); !ok {
			t.Errorf("replaced %s says %q, want the occurrence that replaced it", r.ID, r.Error)
		}
	}
}

// With resume=next, an occurrence that goes on in continuations while it
// finishes the work of one that failed has no progress of its own yet;
// overlap=skip holds for it all the same.
func TestOverlapSkipHoldsWhileAnOccurrenceContinuesAnEarlierOnesWork(t *testing.T) {
	t.Parallel()
	const batches = 60 // about 3.6 s, in continuations of a second's timeout
	var active, most atomic.Int64
	var mu sync.Mutex
	first, finishedFirst := "", false
	handler := func(ctx context.Context, occ registry.Occurrence) error {
		n := active.Add(1)
		defer active.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		return checkpoint.Run(ctx, func(ctx context.Context, cursor string) (string, bool, error) {
			b, _ := checkpoint.CurrentBatch(ctx)
			from, _ := strconv.Atoi(cursor)
			mu.Lock()
			if first == "" {
				first = occ.ID
			}
			givesUp := occ.ID == first && from == 3
			if b.Key == first && from+1 == batches {
				finishedFirst = true
			}
			mu.Unlock()
			if givesUp {
				return "", false, errors.New("the first occurrence gives up")
			}
			select {
			case <-time.After(60 * time.Millisecond):
			case <-ctx.Done():
				return "", false, ctx.Err()
			}
			return strconv.Itoa(from + 1), from+1 == batches, nil
		})
	}
	newCluster(t, sharedRedis(t), 1, runtime.Options{},
		registry.Schedule{Name: "long", Expr: "* * * * * *", Timeout: time.Second, MaxRetry: 0, Overlap: registry.OverlapSkip,
			Resume: registry.ResumeNext, Handler: handler})
	waitFor(t, 30*time.Second, "the first occurrence's work finished by the next", func() bool {
		if m := most.Load(); m > 1 {
			t.Fatalf("%d occurrences ran at once; overlap=skip allows one", m)
		}
		mu.Lock()
		defer mu.Unlock()
		return finishedFirst
	})
	if m := most.Load(); m != 1 {
		t.Errorf("%d occurrences ran at once; overlap=skip allows one", m)
	}
}
