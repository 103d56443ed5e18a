package postgres_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/core"
)

// overlap=skip asks the engine whether the previous occurrence's River
// job is still to finish: a per-second schedule whose run takes longer
// than a second never runs twice at once, and the slots due meanwhile are
// recorded skipped.
func TestOverlapSkipAsksRiversJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := pgHarness{}.NewBackend(t)
	var running, most, runs atomic.Int32
	reg, err := registry.New(registry.Schedule{Name: "slow", Expr: "* * * * * *", Overlap: registry.OverlapSkip,
		Handler: func(context.Context, registry.Occurrence) error {
			n := running.Add(1)
			defer running.Add(-1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			runs.Add(1)
			time.Sleep(2500 * time.Millisecond) // the run outlasts two slots
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	opts, _ := b.Replica(t)
	opts.Replica, opts.LeaseTTL, opts.Logger = "solo", 2*time.Second, quietLogger()
	rt, err := core.New(reg, opts)
	if err != nil {
		t.Fatal(err)
	}
	b.StartWorkers(t, rt)
	runRuntime(t, rt)
	skipped := func() int {
		hist, _ := rt.History(ctx, "slow", 50)
		n := 0
		for _, r := range hist {
			if r.Outcome == core.OutcomeSkipped {
				n++
			}
		}
		return n
	}
	waitUntil(t, 20*time.Second, "two runs and three skipped slots", func() bool { return runs.Load() >= 2 && skipped() >= 3 })
	if m := most.Load(); m != 1 {
		t.Errorf("%d runs at once, want 1", m)
	}
}
