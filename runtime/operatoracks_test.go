package runtime_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
)

// With ReplicaAcks, an operator's write that no replica acknowledges is
// not reported done: a failover to a replica that never got it would undo
// the pause, bring a deleted member back or lose the manual run. The
// shared Redis has no replicas, so every WAIT comes back short; the write
// itself still ran, and says so.
func TestOperatorWritesWaitForReplicaAcks(t *testing.T) {
	t.Parallel()
	reg := familyRegistry(t, newMemberRuns(), uniq("q"), "0 9 * * MON", "UTC")
	rt, err := runtime.New(reg, runtime.Options{Redis: sharedRedis(t), Namespace: uniq("acks"),
		ReplicaAcks: 1, ReplicaAckTimeout: 20 * time.Millisecond, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	ctx := context.Background()
	notAcked := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, runtime.ErrNotAcked) {
			t.Errorf("%s with no replica to acknowledge it: error %v, want ErrNotAcked", what, err)
		}
	}

	notAcked("Pause", rt.Pause(ctx, "nightly", "disk full"))
	if paused, err := rt.Paused(ctx); err != nil || paused["nightly"].Reason != "disk full" {
		t.Errorf("the unacknowledged pause did not run in Redis: %v, %v", paused, err)
	}
	notAcked("Resume", rt.Resume(ctx, "nightly"))

	_, err = rt.Trigger(ctx, "nightly", "req-1")
	notAcked("Trigger", err)
	// The repeat finds the task its first try left and is not "done" on
	// that account alone: it waits for the same acknowledgement.
	_, err = rt.Trigger(ctx, "nightly", "req-1")
	notAcked("a repeated Trigger", err)

	// A backfill waits once, after its last enqueue, and returns every
	// occurrence it enqueued with the error.
	now := time.Now()
	occs, err := rt.Backfill(ctx, "nightly", now.Add(-72*time.Hour), now, "bf-1")
	notAcked("Backfill", err)
	if len(occs) != 3 {
		t.Errorf("an unacknowledged backfill of three nights returned %d occurrences, want the 3 it enqueued", len(occs))
	}

	_, err = rt.Families().Set(ctx, "reports:weekly", runtime.Member{Key: "acme", Zone: "Europe/Paris"})
	notAcked("SetMember", err)
	notAcked("SetMembers", rt.Families().SetMany(ctx, "reports:weekly", []runtime.Member{{Key: "globex", Zone: "Asia/Tokyo"}}))
	notAcked("DeleteMember", rt.Families().Delete(ctx, "reports:weekly", "acme"))
	_, err = rt.Families().Get(ctx, "reports:weekly", "acme")
	if !errors.Is(err, runtime.ErrNoMember) {
		t.Errorf("the unacknowledged delete did not run in Redis: Member says %v", err)
	}
}

// Without ReplicaAcks the same writes wait for nothing.
func TestOperatorWritesWithoutReplicaAcksWaitForNothing(t *testing.T) {
	t.Parallel()
	reg := registry.MustNew(idleSchedule())
	rt, err := runtime.New(reg, runtime.Options{Redis: sharedRedis(t), Namespace: uniq("noacks"), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	ctx := context.Background()
	if err := rt.Pause(ctx, "nightly", "x"); err != nil {
		t.Errorf("Pause: %v", err)
	}
	if _, err := rt.Trigger(ctx, "nightly", ""); err != nil {
		t.Errorf("Trigger: %v", err)
	}
}
