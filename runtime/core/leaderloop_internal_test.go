package core

import (
	"context"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/internal/clock"
	"github.com/redis/go-redis/v9"
)

// Every dispatch counts toward the handover, a family's as a schedule's:
// late dispatches of the two, taking turns in one loop, are late
// dispatches in a row. When a family's dispatch is the one that hands the
// lease over, what the schedules enqueued is committed first (each
// enqueue's mark raised its cursor; a commit after the release would be
// refused, its records and counters lost). Driven by hand on a stub
// clock, the lease renewed between dispatches as its loop would.
func TestEveryDispatchCountsTowardTheHandover(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewStub(time.Now().Truncate(time.Second))
	r, value := leadingRuntimeWith(t, Options{}, clk, nil,
		registry.Schedule{Name: "tick", Expr: "* * * * * *"},
		registry.Schedule{Name: "reports", Expr: "* * * * * *", Per: "tenant"})
	otherReplicaHeartbeats(t, r)
	if err := r.Families().SetMany(ctx, "reports", []Member{{Key: "acme"}}); err != nil {
		t.Fatal(err)
	}
	l := r.newLeaderLoop()
	if err := l.rebuild(ctx, value); err != nil {
		t.Fatal(err)
	}
	step := func(what string) {
		t.Helper()
		if worked, _, err := l.step(ctx, clk.Now()); err != nil || !worked {
			t.Fatalf("%s: worked %v, %v", what, worked, err)
		}
	}
	stillLeads := func(after string) {
		t.Helper()
		if _, ok := r.redisEngine().Current(); !ok {
			t.Fatalf("handed over after %s, want after %d late dispatches in a row", after, handoverAfter)
		}
		if _, err := r.redisEngine().Renew(ctx); err != nil {
			t.Fatal(err)
		}
	}
	late := r.handoverBound() + 2*time.Second
	scheduled := 0
	// On time: the family's first bucket, then the schedule's next slot.
	step("the family's first dispatch")
	clk.Advance(time.Second)
	step("the schedule's first dispatch")
	scheduled++
	stillLeads("two dispatches on time")
	clk.Advance(late)
	step("a late family dispatch")
	stillLeads("one late family dispatch")
	step("a late schedule dispatch")
	scheduled += int(late / time.Second)
	stillLeads("a late family dispatch and a late schedule dispatch")
	clk.Advance(late)
	step("a second late family dispatch")
	if _, ok := r.redisEngine().Current(); ok || r.handoversForLateness() != 1 {
		t.Fatalf("still leading after %d late dispatches in a row, of a family and a schedule (handovers %d)", handoverAfter, r.handoversForLateness())
	}
	if got := r.enqueueLateness(); got < late-time.Second {
		t.Errorf("the newest dispatch's lateness is %s, want the family's, at least %s", got, late-time.Second)
	}
	stats, err := r.redisEngine().Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := stats["tick"][string(OutcomeEnqueued)]; got != int64(scheduled) {
		t.Errorf("the ledger counts %d enqueued occurrences of the schedule, of %d the leader enqueued before a family dispatch handed the lease over", got, scheduled)
	}
}

// otherReplicaHeartbeats makes another replica heartbeat in r's
// namespace, so the lease has somewhere to go.
func otherReplicaHeartbeats(t *testing.T, r *Runtime) {
	t.Helper()
	ctx := context.Background()
	redisNow, err := r.redisEngine().Client.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.redisEngine().Client.ZAdd(ctx, r.redisEngine().Keys.Replicas, redis.Z{Score: float64(redisNow.UnixMilli()), Member: "r1"}).Err(); err != nil {
		t.Fatal(err)
	}
}

// cancelAfterEnqueue cancels a context once its first enqueue is done, as
// a shutdown landing while the leader enqueues a page.
type cancelAfterEnqueue struct{ cancel context.CancelFunc }

func (c cancelAfterEnqueue) BeforeEnqueue(context.Context, *registry.Schedule, registry.Occurrence) (map[string]string, func(bool, error)) {
	return nil, func(bool, error) { c.cancel() }
}

// A shutdown that lands while the leader enqueues a family's page still
// commits what it enqueued: the member's cursor moves past the slot that
// went in (its task ID is not reserved for ever, and its record and
// counters are kept), as the schedules' commits are flushed at shutdown.
func TestAShutdownCommitsTheFamilysEnqueues(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now().Truncate(time.Second)
	clk := clock.NewStub(start)
	r, value := leadingRuntimeWith(t, Options{EnqueueObserver: cancelAfterEnqueue{cancel}}, clk, nil,
		registry.Schedule{Name: "reports", Expr: "* * * * * *", Per: "tenant"})
	if err := r.Families().SetMany(ctx, "reports", []Member{{Key: "acme"}}); err != nil {
		t.Fatal(err)
	}
	l := r.newLeaderLoop()
	if err := l.rebuild(ctx, value); err != nil {
		t.Fatal(err)
	}
	clk.Advance(3 * time.Second) // three slots due: the first goes in, then the shutdown
	l.step(ctx, clk.Now())
	if ctx.Err() == nil {
		t.Fatal("nothing was enqueued")
	}
	l.flush(ctx) // what the loop does when its context ends
	bg := context.Background()
	_, _, cursors, hasCursor, err := r.redisEngine().MemberStates(bg, "reports", []string{"acme"})
	if err != nil {
		t.Fatal(err)
	}
	if first := start.Add(time.Second).Unix(); !hasCursor[0] || cursors[0].Slot != first {
		t.Fatalf("the member's cursor is not its first slot, which went in before the shutdown (has cursor %v: %+v, want slot %d)", hasCursor[0], cursors[0], first)
	}
	stats, err := r.redisEngine().Stats(bg)
	if err != nil {
		t.Fatal(err)
	}
	if got := stats["reports"][string(OutcomeEnqueued)]; got != 1 {
		t.Errorf("the ledger counts %d enqueued occurrences of the family, want the 1 that went in before the shutdown", got)
	}
}
