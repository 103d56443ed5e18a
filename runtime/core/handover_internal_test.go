package core

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/belfry/belfry/internal/redistest"
	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/internal/clock"
	"github.com/belfry/belfry/runtime/internal/redisengine"
)

// A leader that hands the lease over commits what its last dispatches
// enqueued first: each enqueue's mark has raised the cursor past its slot,
// so the next holder never plans those slots again, and a commit sent
// after the release is refused; their records and counters would be lost.
// The dispatches are driven by hand on a stub clock, three in a row later
// than the bound, with the lease renewed between them as its loop would.
func TestAHandoverCommitsWhatTheLeaderEnqueued(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewStub(time.Now().Truncate(time.Second))
	r, value := leadingRuntime(t, registry.Schedule{Name: "tick", Expr: "* * * * * *"}, clk, nil)
	otherReplicaHeartbeats(t, r)
	l := r.newLeaderLoop()
	if err := l.rebuild(ctx, value); err != nil {
		t.Fatal(err)
	}
	late := r.handoverBound() + 2*time.Second
	enqueued := 0
	for i := range handoverAfter {
		clk.Advance(late)
		enqueued += int(late / time.Second)
		if worked, _, err := l.step(ctx, clk.Now()); err != nil || !worked {
			t.Fatalf("dispatch %d: worked %v, %v", i, worked, err)
		}
		if i < handoverAfter-1 {
			if _, ok := r.redisEngine().Current(); !ok {
				t.Fatalf("handed over after %d late dispatches, want %d", i+1, handoverAfter)
			}
			if _, err := r.redisEngine().Renew(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, ok := r.redisEngine().Current(); ok || r.Leadership().HandoversForLateness() != 1 {
		t.Fatalf("still leading after %d late dispatches (handovers %d)", handoverAfter, r.Leadership().HandoversForLateness())
	}
	l.flush(ctx) // what the loop does once it no longer leads
	stats, err := r.redisEngine().Stats(ctx)
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
	return leadingRuntimeWith(t, Options{}, clk, before, s)
}

// leadingRuntimeWith is leadingRuntime for several schedules (sharing one
// fresh queue), with opts' observer.
func leadingRuntimeWith(t *testing.T, opts Options, clk clock.Clock, before func(*Runtime), scheds ...registry.Schedule) (*Runtime, string) {
	t.Helper()
	queue := redistest.Uniq("q")
	for i := range scheds {
		scheds[i].Queue = queue
		scheds[i].Handler = func(context.Context, registry.Occurrence) error { return nil }
	}
	r, err := newRuntime(registry.MustNew(scheds...), Options{Engine: redisengine.NewPending(redistest.Shared(t)), Namespace: redistest.Uniq("internal"),
		Replica: "r0", LeaseTTL: 30 * time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		EnqueueObserver: opts.EnqueueObserver}, clk)
	if err != nil {
		t.Fatal(err)
	}
	if before != nil {
		before(r)
	}
	if _, err := r.redisEngine().Acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	value, ok := r.redisEngine().Current()
	if !ok {
		t.Fatal("the runtime did not take the lease")
	}
	return r, value
}
