package runtime

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/internal/clock"
	"github.com/belfry/belfry/runtime/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// A leader that hands the lease over commits what its last dispatches
// enqueued first: each enqueue's mark has raised the cursor past its slot,
// so the next holder never plans those slots again, and a commit sent
// after the release is refused; their records and counters would be lost.
// The dispatches are driven by hand on a stub clock, three in a row later
// than the bound, with the lease renewed between them as its loop would.
func TestAHandoverCommitsWhatTheLeaderEnqueued(t *testing.T) {
	rdb := redistest.Shared(t)
	ctx := context.Background()
	clk := clock.NewStub(time.Now().Truncate(time.Second))
	r, value := leadingRuntime(t, registry.Schedule{Name: "tick", Expr: "* * * * * *"}, clk, nil)
	// Another replica heartbeats, so the lease has somewhere to go.
	redisNow, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.ZAdd(ctx, r.store.Keys.Replicas, redis.Z{Score: float64(redisNow.UnixMilli()), Member: "r1"}).Err(); err != nil {
		t.Fatal(err)
	}
	st, err := r.loadLeaderState(ctx, value)
	if err != nil {
		t.Fatal(err)
	}
	late := r.handoverBound() + 2*time.Second
	enqueued := 0
	for i := range handoverAfter {
		clk.Advance(late)
		enqueued += int(late / time.Second)
		if err := r.dispatch(ctx, st, clk.Now()); err != nil {
			t.Fatalf("dispatch %d: %v", i, err)
		}
		if i < handoverAfter-1 {
			if _, ok := r.lease.Current(); !ok {
				t.Fatalf("handed over after %d late dispatches, want %d", i+1, handoverAfter)
			}
			if _, err := r.lease.Renew(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, ok := r.lease.Current(); ok || r.Leadership().HandoversForLateness() != 1 {
		t.Fatalf("still leading after %d late dispatches (handovers %d)", handoverAfter, r.Leadership().HandoversForLateness())
	}
	r.flushCommits(ctx, st) // what the loop does once it no longer leads
	stats, err := r.store.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := stats["tick"][string(OutcomeEnqueued)]; got != int64(enqueued) {
		t.Errorf("the ledger counts %d enqueued occurrences of %d the leader enqueued before it handed over", got, enqueued)
	}
}

// leadingRuntime is a runtime for one schedule s (given a fresh queue and
// a no-op handler) in a fresh namespace of the shared Redis, on clk, that
// has taken the lease but runs no loop: the test drives it. before runs
// before the lease is taken.
func leadingRuntime(t *testing.T, s registry.Schedule, clk clock.Clock, before func(*Runtime)) (*Runtime, string) {
	t.Helper()
	s.Queue = redistest.Uniq("q")
	s.Handler = func(context.Context, registry.Occurrence) error { return nil }
	r, err := newRuntime(registry.MustNew(s), Options{Redis: redistest.Shared(t), Namespace: redistest.Uniq("internal"),
		Replica: "r0", LeaseTTL: 30 * time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, clk)
	if err != nil {
		t.Fatal(err)
	}
	if before != nil {
		before(r)
	}
	if _, err := r.lease.Acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	value, ok := r.lease.Current()
	if !ok {
		t.Fatal("the runtime did not take the lease")
	}
	return r, value
}
