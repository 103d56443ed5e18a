package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/engine"
)

// memberItem is the enqueue of family member key's slot.
func memberItem(family, key string, slot time.Time) engine.Enqueue {
	occ := registry.Occurrence{Schedule: family, Member: key, Slot: slot.UTC(), Zone: "UTC",
		ID: "cron:ns/" + family + ":member:" + key + ":" + slot.UTC().Format(time.RFC3339)}
	return engine.Enqueue{Task: engine.Task{Type: family, Payload: registry.EncodeOccurrence(occ), ID: occ.ID, Queue: "default"}}
}

// A member moved while its slot's enqueue is under way waits for that
// enqueue and sees its slot enqueued (the floor's SinceIfTask), rather
// than take the floor of a slot not enqueued and plan the slot again.
func TestAChangeFloorSeesAnEnqueueUnderWay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := migratedDB(t)
	const fam = "reports"
	slot := time.Unix(4000, 0)
	e := oneConnection(t, db, nil, []engine.Enqueue{memberItem(fam, "acme", slot)})
	if _, err := e.SetMembers(ctx, fam, 1000, false, []engine.SetMember{{Key: "bolt", Zone: "UTC"}}, nil); err != nil {
		t.Fatal(err)
	}
	release := holdSlotTable(t, db)
	item := memberItem(fam, "bolt", slot)
	enqueued := make(chan engine.Result, 1)
	go func() { enqueued <- e.EnqueueAll(ctx, nil, []engine.Enqueue{item})[0] }()
	waitUntil(t, 10*time.Second, "the enqueue to wait at its insert", waitingOnLock(t, db))

	other := newEngine(t, db, "admin")
	floor := func(engine.SetMember, engine.MemberValue, engine.MemberCursor, bool) engine.Floor {
		return engine.Floor{Since: 5000, Queue: "default", TaskID: item.Task.ID, SinceIfTask: 6000}
	}
	moved := make(chan error, 1)
	go func() {
		_, err := other.SetMembers(ctx, fam, 3000, false, []engine.SetMember{{Key: "bolt", Zone: "Asia/Tokyo"}}, floor)
		moved <- err
	}()
	waitUntil(t, 10*time.Second, "the move to end or wait", endedOrWaiting(t, db, moved))
	release()
	if r := <-enqueued; r.Err != nil || !r.Inserted {
		t.Fatalf("enqueue: %+v", r)
	}
	if err := <-moved; err != nil {
		t.Fatal(err)
	}
	if vs, _, err := e.Members(ctx, fam, []string{"bolt"}); err != nil || vs[0].Since != 6000 {
		t.Errorf("moved while its slot's enqueue was under way: %+v, %v; want since 6000, the floor of an enqueued slot", vs, err)
	}
}
