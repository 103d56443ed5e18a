package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/belfry/belfry/runtime/engine"
	"github.com/jackc/pgx/v5"
)

// Members are data: created with now as their since, paused with a pause
// kept until replaced or resumed, moved between buckets (a bucket goes
// with its last member), refused a move without a floor, given the floor's
// since when it has one (SinceIfTask once the named slot was enqueued),
// paged in key order, and deleted.
func TestMembersAsData(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := migratedDB(t)
	e := newEngine(t, db, "a")
	const fam = "reports"
	pause := func(reason string, at int64) engine.Pause { return engine.Pause{Reason: reason, Actor: "ops", At: at} }
	created, err := e.SetMembers(ctx, fam, 1000, false, []engine.SetMember{
		{Key: "acme", Zone: "UTC"}, {Key: "bolt", Zone: "UTC"}, {Key: "acme", Zone: "UTC", Paused: true, Pause: pause("first", 5)},
	}, nil)
	if err != nil || len(created) != 3 || !created[0] || !created[1] || created[2] {
		t.Fatalf("SetMembers = %v, %v; want acme and bolt created once each", created, err)
	}
	vs, ok, err := e.Members(ctx, fam, []string{"acme", "bolt", "none", "acme"})
	if err != nil || !ok[0] || !ok[1] || ok[2] || vs[0].Since != 1000 || !vs[0].Paused || vs[1].Paused || vs[3] != vs[0] {
		t.Fatalf("Members = %+v %v, %v", vs, ok, err)
	}
	if _, err := e.SetMembers(ctx, fam, 2000, false, []engine.SetMember{{Key: "acme", Zone: "UTC", Paused: true, Pause: pause("second", 9)}}, nil); err != nil {
		t.Fatal(err)
	}
	if ps, err := e.MemberPauses(ctx, fam, []string{"acme", "bolt"}); err != nil || ps[0] == nil || ps[0].Reason != "first" || ps[0].At != 5 || ps[1] != nil {
		t.Errorf("after pausing again without replace, MemberPauses = %+v, %v; want the first pause kept", ps, err)
	}
	if _, err := e.SetMembers(ctx, fam, 2000, true, []engine.SetMember{{Key: "acme", Zone: "UTC", Paused: true, Pause: pause("second", 9)}}, nil); err != nil {
		t.Fatal(err)
	}
	if ps, _ := e.MemberPauses(ctx, fam, []string{"acme"}); ps[0] == nil || ps[0].Reason != "second" {
		t.Errorf("after replacing, MemberPauses = %+v; want the second pause", ps)
	}
	if _, err := e.SetMembers(ctx, fam, 3000, false, []engine.SetMember{{Key: "bolt", Zone: "Asia/Tokyo"}}, nil); !errors.Is(err, engine.ErrMembersBusy) {
		t.Errorf("a move without a floor = %v, want ErrMembersBusy", err)
	}

	// A move whose floor names a slot: not enqueued, the member takes
	// Since; enqueued, SinceIfTask.
	slot := time.Unix(4000, 0)
	taskID := "cron:ns/reports:member:bolt:4000"
	floor := func(engine.SetMember, engine.MemberValue, engine.MemberCursor, bool) engine.Floor {
		return engine.Floor{Since: 5000, Queue: "default", TaskID: taskID, SinceIfTask: 6000}
	}
	if _, err := e.SetMembers(ctx, fam, 3000, false, []engine.SetMember{{Key: "bolt", Zone: "Asia/Tokyo"}}, floor); err != nil {
		t.Fatal(err)
	}
	if vs, _, _ := e.Members(ctx, fam, []string{"bolt"}); vs[0].Since != 5000 || vs[0].Zone != "Asia/Tokyo" {
		t.Errorf("moved with its slot not enqueued: %+v; want since 5000 in Tokyo", vs[0])
	}
	items := slotItems(fam, slot)
	items[0].Task.ID = taskID
	items[0].Task.Payload = []byte(`{"schedule":"reports","slot":"1970-01-01T01:06:40Z","zone":"UTC","member":"bolt","id":"` + taskID + `"}`)
	items[0].Cursor = engine.CursorMark{}
	if r := e.EnqueueAll(ctx, nil, items); r[0].Err != nil || !r[0].Inserted {
		t.Fatalf("enqueue of the member's slot: %+v", r[0])
	}
	if _, err := e.SetMembers(ctx, fam, 3000, false, []engine.SetMember{{Key: "bolt", Zone: "UTC"}}, floor); err != nil {
		t.Fatal(err)
	}
	if vs, _, _ := e.Members(ctx, fam, []string{"bolt"}); vs[0].Since != 6000 {
		t.Errorf("moved with its slot enqueued: since %d, want 6000", vs[0].Since)
	}

	buckets, err := e.BucketsChangedAfter(ctx, fam, 0)
	if err != nil || len(buckets) != 1 || buckets[0].Bucket != engine.BucketOf("UTC", "") {
		t.Errorf("BucketsChangedAfter(0) = %+v, %v; want the UTC bucket alone (Tokyo's emptied)", buckets, err)
	}
	if page, next, err := e.ScanMembers(ctx, fam, "", "", 1); err != nil || len(page) != 1 || page[0].Key != "acme" || next == "" {
		t.Errorf("first page = %+v, %q, %v", page, next, err)
	} else if page, next, err := e.ScanMembers(ctx, fam, next, "", 1); err != nil || len(page) != 1 || page[0].Key != "bolt" || next != "" {
		t.Errorf("second page = %+v, %q, %v; want bolt, the last", page, next, err)
	}
	if _, _, err := e.ScanMembers(ctx, fam, "not-a-cursor", "", 1); !errors.Is(err, engine.ErrBadCursor) {
		t.Errorf("a cursor never handed out: %v, want ErrBadCursor", err)
	}
	if gone, err := e.DeleteMember(ctx, fam, "acme"); err != nil || !gone {
		t.Errorf("DeleteMember = %v, %v", gone, err)
	}
	if n, err := e.MemberCount(ctx, fam); err != nil || n != 1 {
		t.Errorf("MemberCount = %d, %v; want 1", n, err)
	}
}

// The leader's step rewrites every member's cursor on every slot, and the
// rewrite of a whole page of members stays on the rows' own pages, though
// the first makes each row longer: no new entry in the member indexes for
// each member and slot, and a fraction of the write-ahead log a moved row
// costs. (Later steps reuse the room once no transaction of the database
// sees the old versions, which other sessions decide.)
func TestAMemberStepRewritesRowsInPlace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, e := leasedEngine(t)
	const fam, n = "reports", 2000
	ms := make([]engine.SetMember, n)
	for i := range ms {
		ms[i] = engine.SetMember{Key: fmt.Sprintf("tenant-%05d", i), Expr: "*/10 * * * * *"}
	}
	if _, err := e.SetMembers(ctx, fam, 1000, false, ms, nil); err != nil {
		t.Fatal(err)
	}
	pages := func() map[string]string {
		rows, err := db.Query(ctx, `SELECT key, (ctid::text::point)[0]::text FROM belfry_member WHERE namespace = 'ns' AND family = $1`, fam)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		var key, page string
		if _, err := pgx.ForEachRow(rows, []any{&key, &page}, func() error { out[key] = page; return nil }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	before := pages()
	const slot = 2000
	for start := 0; start < n; start += 1000 {
		var mcs []engine.MemberCommit
		for _, m := range ms[start : start+1000] {
			mcs = append(mcs, engine.MemberCommit{Member: m.Key, Cursor: fmt.Sprintf("%d 0", slot),
				Last: fmt.Sprintf("%d enqueued %d", slot, slot*1000), LastSlot: slot})
		}
		if err := e.CommitFamily(ctx, "1", fam, engine.Commit{}, mcs, "", ""); err != nil {
			t.Fatal(err)
		}
	}
	moved := 0
	for key, page := range pages() {
		if before[key] != page {
			moved++
		}
	}
	if moved > 0 {
		t.Errorf("a step moved %d of %d member rows to another page; want every rewrite in place", moved, n)
	}
}

// An enqueue of members' slots leaves the members' rows as they are: it
// holds their family's lock (see TestAChangeFloorSeesAnEnqueueUnderWay),
// not a lock on each row, which would write each row's page and the
// write-ahead log once a member (a locker's ID in the row, xmax).
func TestAnEnqueueOfMembersWritesNoMemberRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, e := leasedEngine(t)
	const fam = "reports"
	var ms []engine.SetMember
	var items []engine.Enqueue
	for i := range 50 {
		key := fmt.Sprintf("tenant-%02d", i)
		ms = append(ms, engine.SetMember{Key: key, Expr: "*/10 * * * * *"})
		items = append(items, memberItem(fam, key, time.Unix(2000, 0)))
	}
	if _, err := e.SetMembers(ctx, fam, 1000, false, ms, nil); err != nil {
		t.Fatal(err)
	}
	for i, r := range e.EnqueueAll(ctx, &engine.Fence{Term: "1"}, items) {
		if r.Err != nil || !r.Inserted {
			t.Fatalf("enqueue %d: %+v", i, r)
		}
	}
	var written int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM belfry_member WHERE namespace = 'ns' AND family = $1 AND xmax::text <> '0'`, fam).Scan(&written); err != nil {
		t.Fatal(err)
	}
	if written > 0 {
		t.Errorf("the enqueue wrote %d of %d member rows (locked them); want none", written, len(ms))
	}
}

// A move of many members asks which of their slots were enqueued in one
// statement, not one a member: it holds the family's lock meanwhile,
// which stalls the family's enqueues. Each member still takes the floor
// its own slot calls for.
func TestAMoveOfManyMembersAsksAboutTheirSlotsAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, trips := traced(t, migratedDB(t))
	holdLease(t, db)
	e := newEngine(t, db, "old")
	const fam, n = "reports", 50
	var ms, moved []engine.SetMember
	for i := range n {
		key := fmt.Sprintf("tenant-%02d", i)
		ms, moved = append(ms, engine.SetMember{Key: key, Zone: "UTC"}), append(moved, engine.SetMember{Key: key, Zone: "Asia/Tokyo"})
	}
	if _, err := e.SetMembers(ctx, fam, 1000, false, ms, nil); err != nil {
		t.Fatal(err)
	}
	// The even members' slots are in.
	var items []engine.Enqueue
	for i := 0; i < n; i += 2 {
		items = append(items, memberItem(fam, ms[i].Key, time.Unix(4000, 0)))
	}
	for _, r := range e.EnqueueAll(ctx, &engine.Fence{Term: "1"}, items) {
		if r.Err != nil || !r.Inserted {
			t.Fatalf("enqueue: %+v", r)
		}
	}
	floor := func(m engine.SetMember, _ engine.MemberValue, _ engine.MemberCursor, _ bool) engine.Floor {
		return engine.Floor{Since: 5000, Queue: "default", TaskID: memberItem(fam, m.Key, time.Unix(4000, 0)).Task.ID, SinceIfTask: 6000}
	}
	trips.n.Store(0)
	if _, err := e.SetMembers(ctx, fam, 3000, false, moved, floor); err != nil {
		t.Fatal(err)
	}
	if got := trips.n.Load(); got > 8 {
		t.Errorf("moving %d members took %d round trips; want a few, not one a member", n, got)
	}
	vs, _, err := e.Members(ctx, fam, func() (keys []string) {
		for _, m := range ms {
			keys = append(keys, m.Key)
		}
		return keys
	}())
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range vs {
		want := int64(5000)
		if i%2 == 0 {
			want = 6000
		}
		if v.Since != want || v.Zone != "Asia/Tokyo" {
			t.Errorf("member %s after the move: since %d, zone %s; want %d, Asia/Tokyo", v.Key, v.Since, v.Zone, want)
		}
	}
}
