package checkpoint_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/belfry/belfry/internal/redistest"
	"github.com/belfry/belfry/runtime/checkpoint"
	"github.com/belfry/belfry/runtime/engine"
	"github.com/belfry/belfry/runtime/internal/store"
)

func progressStore(t *testing.T) engine.Progress {
	t.Helper()
	return store.New(redistest.Shared(t), redistest.Uniq("ns"), 10, time.Hour)
}

// counter is a step over n items, batch at a time, counting each item.
type counter struct {
	n, batch int
	mu       sync.Mutex
	seen     map[string]map[int]int // by progress key
	// before, when not nil, runs before each batch with its key and start.
	before func(ctx context.Context, key string, from int) error
}

func newCounter(n, batch int) *counter {
	return &counter{n: n, batch: batch, seen: map[string]map[int]int{}}
}

func (c *counter) step(ctx context.Context, cursor string) (string, bool, error) {
	b, _ := checkpoint.CurrentBatch(ctx)
	from, _ := strconv.Atoi(cursor)
	if c.before != nil {
		if err := c.before(ctx, b.Key, from); err != nil {
			return "", false, err
		}
	}
	to := min(from+c.batch, c.n)
	c.mu.Lock()
	if c.seen[b.Key] == nil {
		c.seen[b.Key] = map[int]int{}
	}
	for i := from; i < to; i++ {
		c.seen[b.Key][i]++
	}
	c.mu.Unlock()
	checkpoint.Add(ctx, int64(to-from))
	return strconv.Itoa(to), to == c.n, nil
}

// check fails unless key's n items were each processed once.
func (c *counter) check(t *testing.T, key string) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range c.n {
		if got := c.seen[key][i]; got != 1 {
			t.Errorf("%s: item %d processed %d times, want once", key, i, got)
			return
		}
	}
}

func bind(st engine.Progress, key, scope string) context.Context {
	return checkpoint.Bind(context.Background(), &checkpoint.Binding{Store: st, Key: key, Scope: scope})
}

// A newer attempt's claim fences the older one: the older one's next save
// is refused, the cursor stays where the newer attempt found it, and the
// older one stops at once with *Superseded.
func TestStaleAttemptCannotMoveTheCursor(t *testing.T) {
	t.Parallel()
	st := progressStore(t)
	c := newCounter(100, 10)
	var claimed engine.Checkpoint
	c.before = func(ctx context.Context, key string, from int) (err error) {
		if from == 30 { // a newer attempt of the same occurrence starts
			claimed, err = st.ClaimProgress(context.Background(), key, "", key, time.Now().UnixMilli())
		}
		return err
	}
	err := checkpoint.Run(bind(st, "occ", ""), c.step)
	var sup *checkpoint.Superseded
	if !errors.As(err, &sup) || !errors.Is(err, engine.ErrSuperseded) {
		t.Fatalf("Run = %v, want *Superseded", err)
	}
	if claimed.Cursor != "30" || claimed.Gen != 2 {
		t.Errorf("the newer claim found %+v, want cursor 30 at generation 2", claimed)
	}
	cps, _, err := st.Progresses(context.Background(), []string{"occ"})
	if err != nil {
		t.Fatal(err)
	}
	if cps[0].Cursor != "30" || cps[0].Items != 30 {
		t.Errorf("saved progress %+v; the stale attempt's batch must not move it past 30", cps[0])
	}
	if c.seen["occ"][40] != 0 {
		t.Error("the stale attempt ran a batch after its save was refused")
	}
	// The newer attempt finishes from where it found the cursor.
	c.before = nil
	if err := checkpoint.Run(bind(st, "occ", ""), c.step); err != nil {
		t.Fatal(err)
	}
	cps, _, _ = st.Progresses(context.Background(), []string{"occ"})
	if !cps[0].Done || cps[0].Items != 100 || cps[0].Resumptions() != 2 {
		t.Errorf("progress %+v, want done, 100 items (the stale attempt's batch not counted), 2 resumptions", cps[0])
	}
	if c.seen["occ"][35] != 2 || c.seen["occ"][45] != 1 {
		t.Errorf("items 35 and 45 processed %d and %d times; want the stale attempt's one batch twice, the next once",
			c.seen["occ"][35], c.seen["occ"][45])
	}
}

// With resume=next, the next occurrence first finishes what the previous
// one left, then does its own; an occurrence already done is not run again.
func TestResumeNextCarriesUnfinishedWork(t *testing.T) {
	t.Parallel()
	st := progressStore(t)
	c := newCounter(50, 10)
	failed := false
	c.before = func(_ context.Context, key string, from int) error {
		if key == "night-1" && from == 30 && !failed {
			failed = true
			return errors.New("night 1 gives up")
		}
		return nil
	}
	if err := checkpoint.Run(bind(st, "night-1", "prune"), c.step); err == nil {
		t.Fatal("night 1 succeeded; the test needs it to fail")
	}
	if u, err := st.Unfinished(context.Background(), "prune"); err != nil || u != "night-1" {
		t.Fatalf("unfinished = %q, %v; want night-1", u, err)
	}
	if err := checkpoint.Run(bind(st, "night-2", "prune"), c.step); err != nil {
		t.Fatal(err)
	}
	c.check(t, "night-1")
	c.check(t, "night-2")
	if u, _ := st.Unfinished(context.Background(), "prune"); u != "" {
		t.Errorf("unfinished = %q after night 2 finished, want none", u)
	}
	cps, _, _ := st.Progresses(context.Background(), []string{"night-1", "night-2"})
	if !cps[0].Done || cps[0].By != "night-2" || !cps[1].Done {
		t.Errorf("progress %+v; want both done, night 1's finished by night 2", cps)
	}
}

// When the next occurrence takes the previous one's work over while it
// still runs, the previous one stops at its next save: never two copies
// over the same rows.
func TestResumeNextStopsThePreviousOccurrence(t *testing.T) {
	t.Parallel()
	st := progressStore(t)
	c := newCounter(60, 10)
	paused, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	c.before = func(_ context.Context, key string, from int) error {
		if key == "night-1" && from == 20 {
			// Night 1's own batch waits while night 2 starts.
			once.Do(func() { close(paused); <-resume })
		}
		return nil
	}
	first := make(chan error, 1)
	go func() { first <- checkpoint.Run(bind(st, "night-1", "prune"), c.step) }()
	<-paused
	second := make(chan error, 1)
	go func() { second <- checkpoint.Run(bind(st, "night-2", "prune"), c.step) }()
	// Night 2 has claimed night 1's progress once it has a batch of it.
	deadline := time.Now().Add(10 * time.Second)
	for {
		cps, _, err := st.Progresses(context.Background(), []string{"night-1"})
		if err == nil && cps[0].By == "night-2" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("night 2 did not claim night 1's progress")
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(resume)
	var sup *checkpoint.Superseded
	if err := <-first; !errors.As(err, &sup) || sup.By != "night-2" {
		t.Fatalf("night 1's Run = %v, want superseded by night-2", err)
	}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	cps, _, _ := st.Progresses(context.Background(), []string{"night-1", "night-2"})
	if !cps[0].Done || !cps[1].Done {
		t.Errorf("progress %+v, want both done", cps)
	}
	c.check(t, "night-2")
}

// An occurrence whose take-over of the previous one's work is itself
// taken over (by a later occurrence) leaves that work to it and does its
// own.
func TestResumeNextLeavesATakenOverPreviousToItsTaker(t *testing.T) {
	t.Parallel()
	st := progressStore(t)
	c := newCounter(40, 10)
	failed := false
	c.before = func(ctx context.Context, key string, from int) (err error) {
		switch {
		case key == "night-1" && from == 20 && !failed:
			failed = true
			return errors.New("night 1 gives up")
		case key == "night-1" && from == 30:
			// night 3 takes night 1's work over while night 2 runs it
			_, err = st.ClaimProgress(context.Background(), key, "prune", "night-3", time.Now().UnixMilli())
		}
		return err
	}
	if err := checkpoint.Run(bind(st, "night-1", "prune"), c.step); err == nil {
		t.Fatal("night 1 succeeded; the test needs it to fail")
	}
	if err := checkpoint.Run(bind(st, "night-2", "prune"), c.step); err != nil {
		t.Fatalf("night 2 = %v, want nil: its own work done, night 1's left to night 3", err)
	}
	c.check(t, "night-2")
	cps, _, _ := st.Progresses(context.Background(), []string{"night-1", "night-2"})
	if cps[0].Done || cps[0].By != "night-3" || cps[0].Cursor != "30" || !cps[1].Done {
		t.Errorf("progress %+v; want night 1 at 30 claimed by night-3, night 2 done", cps)
	}
}
