package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/belfry/belfry/runtime/engine"
	"github.com/belfry/belfry/runtime/postgres"
)

// A replica cut off in the middle of an enqueue, its slot rows inserted
// but not committed, does not hold those slots for long: its transaction
// ends within a lease TTL of going silent, and another planner's enqueue
// of the same slots, which waits on those rows meanwhile, then goes in.
func TestACutOffEnqueueDoesNotHoldItsSlots(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := migratedDB(t)
	cutPool, proxy := poolThroughProxy(t, db.Config())
	t.Cleanup(proxy.Pass)
	const ttl = 2 * time.Second
	cut := configured(t, postgres.Config{Pool: cutPool}, engine.Config{Namespace: "ns", Replica: "cut", LeaseTTL: ttl})
	other := newEngine(t, db, "other")
	items := slotItems("tick", time.Now().Truncate(time.Second))

	// Replies come late, so the cut replica's transaction is open, its
	// slot row inserted, while it waits for the insert's reply: then the
	// link is cut.
	proxy.Delay(time.Second)
	cutCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	go cut.EnqueueAll(cutCtx, nil, items)
	waitUntil(t, 20*time.Second, "the cut replica's uncommitted slot row", func() bool {
		// A transaction ID is given at the first write: the slot row's.
		return count(t, db, `SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
			WHERE l.locktype = 'transactionid' AND a.datname = current_database() AND l.pid <> pg_backend_pid()`) > 0
	})
	proxy.BlackHole()

	start := time.Now()
	otherCtx, cancelOther := context.WithTimeout(ctx, 20*time.Second)
	defer cancelOther()
	r := other.EnqueueAll(otherCtx, nil, items)[0]
	took := time.Since(start)
	if r.Err != nil || !r.Inserted {
		t.Fatalf("the other planner's enqueue of the held slot after %s: %+v; want it inserted", took.Round(time.Millisecond), r)
	}
	if took > 2*ttl {
		t.Errorf("the other planner waited %s for the held slot; want at most about the cut replica's lease TTL (%s)", took.Round(time.Millisecond), ttl)
	}
	t.Logf("the held slot went in %s after the cut", took.Round(time.Millisecond))
}
