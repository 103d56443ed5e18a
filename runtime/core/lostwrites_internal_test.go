package core

import (
	"context"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/internal/clock"
	"github.com/belfry/belfry/runtime/internal/lease"
	"github.com/belfry/belfry/runtime/internal/store"
)

// A replica that knew the epoch from before a loss, and takes the lease
// after another replica handled it, finds the loss handled even when a
// one-slot loss of an enqueue in doubt was recorded since (the leader
// retrying the slots it could not get acknowledged during the failover):
// that record carries no fencing token and is not the store-wide loss, so
// it must not make this replica move every cursor again, which would skip
// the slots its takeover has to run.
func TestALossInDoubtDoesNotHideAHandledLoss(t *testing.T) {
	ctx := context.Background()
	r, value := leadingRuntime(t, registry.Schedule{Name: "tick", Expr: "* * * * * *"}, clock.Real{}, func(r *Runtime) {
		// As a follower before the loss.
		if err := r.redisEngine().Client.Set(context.Background(), r.redisEngine().Keys.Epoch, "before-the-loss", 0).Err(); err != nil {
			t.Fatal(err)
		}
		r.redisEngine().Learn(context.Background())
		if err := r.redisEngine().Client.Del(context.Background(), r.redisEngine().Keys.Epoch).Err(); err != nil { // the loss
			t.Fatal(err)
		}
		if !r.redisEngine().KnowsEpoch() {
			t.Fatal("the follower did not learn the epoch")
		}
	})
	epoch, _, err := r.redisEngine().Epoch(ctx, value, "after-the-loss")
	if err != nil {
		t.Fatal(err)
	}
	_, token := lease.ParseValue(value)
	now := time.Now().Unix()
	// Another replica found the loss and recorded it; then one of
	// its enqueues in doubt turned out gone.
	for _, l := range []store.LostWrites{
		{Replica: "r0", Reason: "store-wide", From: now - 60, To: now - 10, Epoch: epoch, Token: token},
		{Replica: "r0", Reason: "in doubt", From: now - 5, To: now - 5},
	} {
		if err := r.redisEngine().RecordLost(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	resume, _, err := r.checkLostWrites(ctx, value)
	if err != nil {
		t.Fatal(err)
	}
	if !resume.IsZero() {
		t.Errorf("the takeover moves every cursor to %s for a loss already handled", resume.UTC())
	}
}

// The families' floor (no member runs a slot at or before a store-wide
// loss's resume point) comes from store-wide losses only: a one-slot loss
// of an enqueue in doubt would otherwise skip, unrecorded, every member's
// slots up to that slot, which a new leader still has to enqueue.
func TestAFamilyFloorIgnoresALossInDoubt(t *testing.T) {
	ctx := context.Background()
	r, value := leadingRuntime(t, registry.Schedule{Name: "report", Expr: "* * * * * *", Per: "tenant"}, clock.Real{}, nil)
	now := time.Now().Unix()
	storeWide := store.LostWrites{Replica: "r0", Reason: "store-wide", From: now - 60, To: now - 30, Epoch: "e", Token: 1}
	inDoubt := store.LostWrites{Replica: "r0", Reason: "in doubt", From: now - 5, To: now - 5}
	for _, l := range []store.LostWrites{storeWide, inDoubt} {
		if err := r.redisEngine().RecordLost(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	st, err := r.loadFamilies(ctx, value)
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Unix(storeWide.To, 0); !st.lostFloor.Equal(want) {
		t.Errorf("the members' floor is %s, want the store-wide loss's resume point %s", st.lostFloor.UTC(), want.UTC())
	}
}
