package lease

import (
	"context"
	"testing"
	"time"
)

// A holder hands over only to a live follower, then stays out of the
// election; the next handover waits out the window; and when nobody takes
// the lease it was handed (the follower died) the cooled-down replica
// leads again after a TTL instead of leaving the lease free for the whole
// cool-down.
func TestHandoverNeedsAFollowerAndEndsWhenNobodyTakesTheLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const ttl = 3 * time.Second
	b := setup(t, 2, ttl)
	l0, l1 := b.leases[0], b.leases[1]
	if _, err := l0.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	if outcome, _, err := l0.Handover(ctx, "test", time.Minute, time.Hour); err != nil || outcome != HandoverAlone {
		t.Fatalf("handover with no other replica alive: %v %v, want %v", outcome, err, HandoverAlone)
	}
	if _, err := l1.Acquire(ctx); err != nil { // a follower heartbeats
		t.Fatal(err)
	}
	outcome, wait, err := l0.Handover(ctx, "test", time.Minute, time.Hour)
	if err != nil || outcome != HandedOver || wait != time.Minute {
		t.Fatalf("handover to a live follower: %v %s %v, want handed over for 1m", outcome, wait, err)
	}
	if _, ok := l0.Current(); ok {
		t.Fatal("the replica still leads after handing over")
	}
	if _, ok := l0.CoolingDown(); !ok {
		t.Fatal("the replica is not cooling down after handing over")
	}
	if _, err := l0.acquire(ctx, true); err != nil {
		t.Fatal(err)
	}
	if _, ok := l0.Current(); ok {
		t.Fatal("a replica cooling down took the lease back")
	}
	// Nobody took it for a TTL: the cool-down ends.
	b.clocks[0].Advance(ttl)
	wait, err = l0.acquire(ctx, true)
	if err != nil || wait != 0 {
		t.Fatalf("cooling down with the lease free for a TTL: next try in %s (%v), want at once", wait, err)
	}
	if _, ok := l0.CoolingDown(); ok {
		t.Fatal("the cool-down did not end with the lease free")
	}
	if _, err := l0.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := l0.Current(); !ok {
		t.Fatal("the replica did not lead again")
	}
	// The first handover's window holds.
	if outcome, left, err := l0.Handover(ctx, "test", time.Minute, time.Hour); err != nil || outcome != HandoverRecent || left <= 0 {
		t.Errorf("a second handover within the first's window: %v %s %v, want refused as recent", outcome, left, err)
	}
}
