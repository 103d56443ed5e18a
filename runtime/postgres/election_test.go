package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/belfry/belfry/internal/redistest"
	"github.com/belfry/belfry/runtime/engine"
	"github.com/belfry/belfry/runtime/postgres"
)

var waitUntil = redistest.WaitFor

func leading(e *postgres.Engine) func() bool {
	return func() bool { _, ok := e.Current(); return ok }
}

// A holder hands the lease over to a live follower, which leads at once
// (not at the TTL); a second handover within the window is refused, and a
// replica with nobody to hand over to keeps the lease. Holder names the
// holder, its term and the live replicas.
func TestHandoverGoesToALiveReplica(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := migratedDB(t)
	a, b := newEngine(t, db, "a"), newEngine(t, db, "b")
	termA, _ := lead(t, a)
	run(t, b)
	waitListed(t, a, "a", "b")
	if h, _ := a.Holder(ctx); h.Replica != "a" || h.Token != mustInt(t, termA) {
		t.Errorf("Holder = %+v, want a with term %s", h, termA)
	}

	handedAt := time.Now()
	outcome, wait, err := a.Handover(ctx, "a test", time.Second, 10*time.Second)
	if err != nil || outcome != engine.HandedOver || wait != time.Second {
		t.Fatalf("Handover = %v, %s, %v; want handed over with a 1s cool-down", outcome, wait, err)
	}
	if _, ok := a.Current(); ok {
		t.Error("a still leads after handing over")
	}
	waitUntil(t, 2*time.Second, "b to lead", leading(b))
	if took := time.Since(handedAt); took > time.Second {
		t.Errorf("b led %s after the handover; want at once, not at the 2s TTL", took)
	}
	if outcome, wait, err := b.Handover(ctx, "again", time.Second, 10*time.Second); err != nil || outcome != engine.HandoverRecent || wait <= 0 {
		t.Errorf("a second Handover at once = %v, %s, %v; want refused while the window holds", outcome, wait, err)
	}

	solo := configured(t, postgres.Config{Pool: db}, engine.Config{Namespace: "solo", Replica: "s", LeaseTTL: 2 * time.Second})
	lead(t, solo)
	if outcome, _, err := solo.Handover(ctx, "alone", time.Second, 10*time.Second); err != nil || outcome != engine.HandoverAlone {
		t.Errorf("Handover with no other replica = %v, %v; want HandoverAlone", outcome, err)
	}
	if _, ok := solo.Current(); !ok {
		t.Error("the lone replica stopped leading")
	}
}

// Two processes given one replica name both learn of it from their
// heartbeats.
func TestADuplicateReplicaNameIsReported(t *testing.T) {
	t.Parallel()
	db := migratedDB(t)
	one, two := newEngine(t, db, "same"), newEngine(t, db, "same")
	run(t, one)
	run(t, two)
	for _, e := range []*postgres.Engine{one, two} {
		waitUntil(t, 15*time.Second, "the duplicate name to be reported", func() bool {
			d, ok := e.Duplicate()
			return ok && d.Replica == "same" && d.Other != "" && d.Other != d.Instance
		})
	}
}

// A replica that releases (a graceful shutdown) leaves the replica list at
// once, as it does on Redis, not when its heartbeat goes stale.
func TestAReleasedReplicaLeavesTheList(t *testing.T) {
	t.Parallel()
	db := migratedDB(t)
	a, b := newEngine(t, db, "a"), newEngine(t, db, "b")
	_, stopA := lead(t, a)
	run(t, b)
	waitListed(t, b, "a", "b")
	stopA()
	if h, err := b.Holder(context.Background()); err != nil || !slices.Equal(h.Replicas, []string{"b"}) {
		t.Errorf("after a's release Holder = %+v, %v; want b alone listed", h, err)
	}
}

// waitListed waits until e's Holder lists the replicas named, and only
// them: each has beaten.
func waitListed(t *testing.T, e *postgres.Engine, names ...string) {
	t.Helper()
	waitUntil(t, 5*time.Second, fmt.Sprintf("replicas %v to beat", names), func() bool {
		h, err := e.Holder(context.Background())
		return err == nil && slices.Equal(h.Replicas, names)
	})
}
