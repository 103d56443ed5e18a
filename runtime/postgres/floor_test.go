package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/engine"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
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
	changeFloorSeesAnEnqueueUnderWay(t, migratedDB(t))
}

// The same on a database whose sessions default to REPEATABLE READ: the
// engine's transactions are READ COMMITTED whatever the default, else the
// move's look at the slot would use a snapshot from before its wait.
func TestAChangeFloorSeesAnEnqueueUnderWayWhateverTheDatabasesIsolation(t *testing.T) {
	t.Parallel()
	changeFloorSeesAnEnqueueUnderWay(t, repeatableReadDB(t))
}

// repeatableReadDB is a migrated database whose sessions default to
// REPEATABLE READ.
func repeatableReadDB(t *testing.T) *pgxpool.Pool {
	t.Helper()
	cfg := migratedDB(t).Config()
	cfg.ConnConfig.RuntimeParams["default_transaction_isolation"] = "repeatable read"
	db, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return db
}

// holding is a transaction of db that has run update, which locks the
// rows it changes until the transaction ends: rolled back when t ends, if
// the test has not ended it.
func holding(t *testing.T, db *pgxpool.Pool, update string) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback(ctx) })
	if _, err := tx.Exec(ctx, update); err != nil {
		t.Fatal(err)
	}
	return tx
}

func changeFloorSeesAnEnqueueUnderWay(t *testing.T, db *pgxpool.Pool) {
	ctx := context.Background()
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

// A member's delete takes the namespace's member version before the
// member's row, as SetMembers does: the other order (the row, then the
// version) waits for a SetMembers that holds the version while holding a
// row that SetMembers may want next, a deadlock.
func TestADeleteOfAMemberTakesTheVersionFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, e := leasedEngine(t)
	const fam = "reports"
	if _, err := e.SetMembers(ctx, fam, 1000, false, []engine.SetMember{{Key: "acme", Zone: "UTC"}}, nil); err != nil {
		t.Fatal(err)
	}
	// A SetMembers between its version and its rows.
	mover := holding(t, db, `UPDATE belfry_family_version SET version = version + 1 WHERE namespace = 'ns'`)
	deleted := make(chan error, 1)
	go func() {
		_, err := e.DeleteMember(ctx, fam, "acme")
		deleted <- err
	}()
	waitUntil(t, 10*time.Second, "the delete to wait", waitingOnLock(t, db))
	if _, err := mover.Exec(ctx, `SELECT 1 FROM belfry_member WHERE namespace = 'ns' AND family = $1 AND key = 'acme' FOR UPDATE NOWAIT`, fam); err != nil {
		t.Errorf("the member's row while its delete waits for the version: %v; want it free", err)
	}
	mover.Rollback(ctx)
	if err := <-deleted; err != nil {
		t.Fatal(err)
	}
	if found, err := e.DeleteMember(ctx, fam, "acme"); err != nil || found {
		t.Errorf("deleting it again: %v, %v; want not found", found, err)
	}
}
