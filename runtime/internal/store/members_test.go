package store_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/belfry/belfry/internal/redistest"
	"github.com/belfry/belfry/runtime/internal/pipeline"
	"github.com/belfry/belfry/runtime/internal/store"
)

// A member is in exactly one bucket, the bucket index holds the buckets
// with members, and every change bumps the version the leader polls.
func TestMembersMoveBetweenBuckets(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	const fam = "weekly"
	v0, _ := s.FamilyVersion(ctx)
	created, err := s.SetMembers(ctx, fam, 100, false, []store.SetMember{{Key: "acme", Zone: "Asia/Tokyo"}, {Key: "globex"}}, nil)
	if err != nil || !slices.Equal(created, []bool{true, true}) {
		t.Fatalf("SetMembers = %v, %v", created, err)
	}
	// Without a ChangeFloor a write must keep each member's bucket.
	if _, err := s.SetMembers(ctx, fam, 200, false, []store.SetMember{{Key: "acme", Zone: "America/New_York", Paused: true}}, nil); !errors.Is(err, store.ErrMembersBusy) {
		t.Errorf("a move without a ChangeFloor: %v; want ErrMembersBusy", err)
	}
	keep := func(store.SetMember, store.MemberValue, store.MemberCursor, bool) store.Floor { return store.Floor{} }
	created, err = s.SetMembers(ctx, fam, 200, false, []store.SetMember{{Key: "acme", Zone: "America/New_York", Paused: true}}, keep)
	if err != nil || created[0] {
		t.Errorf("an update: created %v, %v; want an update", created, err)
	}
	ms, ok, _ := s.Members(ctx, fam, []string{"acme", "nope"})
	if !ok[0] || ok[1] || ms[0].Since != 100 || !ms[0].Paused || ms[0].Zone != "America/New_York" {
		t.Errorf("acme after the move: %+v %v; want created at 100, paused, in New York", ms[0], ok)
	}
	bvs, _ := s.BucketsChangedAfter(ctx, fam, v0)
	var buckets []string
	for _, bv := range bvs {
		buckets = append(buckets, bv.Bucket)
	}
	slices.Sort(buckets)
	if want := []string{"America/New_York|", "|"}; !slices.Equal(buckets, want) {
		t.Errorf("buckets %v; want %v (Tokyo emptied and dropped)", buckets, want)
	}
	if page, _ := s.BucketPage(ctx, fam, "Asia/Tokyo|", "", 10); len(page) != 0 {
		t.Errorf("acme is still in its old bucket: %v", page)
	}
	if v1, _ := s.FamilyVersion(ctx); v1 != v0+2 {
		t.Errorf("version %d after two writes from %d", v1, v0)
	}
}

// A member whose bucket changes takes the floor computed from what was
// read just before the write; if a leader handled one of its slots in
// between (its cursor moved), the write reads again and computes anew,
// instead of writing a floor from a cursor that is no longer true.
func TestAChangeFloorIsWrittenOnlyOverWhatItWasComputedFrom(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	const fam = "weekly"
	if _, err := s.SetMembers(ctx, fam, 100, false, []store.SetMember{{Key: "acme"}}, nil); err != nil {
		t.Fatal(err)
	}
	cursors := s.Keys.Family(fam).Cursors
	rdb := redistest.Shared(t)
	rdb.HSet(ctx, cursors, "acme", "1000 0")
	var seen []int64
	floor := func(m store.SetMember, old store.MemberValue, c store.MemberCursor, has bool) store.Floor {
		seen = append(seen, c.Slot)
		if len(seen) == 1 {
			rdb.HSet(ctx, cursors, "acme", "2000 0") // a leader handles a slot now
		}
		return store.Floor{Since: c.Slot + 10}
	}
	if _, err := s.SetMembers(ctx, fam, 300, false, []store.SetMember{{Key: "acme", Zone: "Asia/Tokyo"}}, floor); err != nil {
		t.Fatal(err)
	}
	ms, _, _ := s.Members(ctx, fam, []string{"acme"})
	if !slices.Equal(seen, []int64{1000, 2000}) || ms[0].Since != 2010 || ms[0].Zone != "Asia/Tokyo" {
		t.Errorf("cursors seen %v, since %d, zone %q; want 1000 then 2000, 2010, Asia/Tokyo", seen, ms[0].Since, ms[0].Zone)
	}
	// A write that keeps the bucket asks for no floor, and keeps since.
	seen = nil
	if _, err := s.SetMembers(ctx, fam, 400, false, []store.SetMember{{Key: "acme", Zone: "Asia/Tokyo", Paused: true}}, floor); err != nil {
		t.Fatal(err)
	}
	if ms, _, _ = s.Members(ctx, fam, []string{"acme"}); len(seen) != 0 || ms[0].Since != 2010 {
		t.Errorf("a pause computed floors %v and left since %d; want none and 2010", seen, ms[0].Since)
	}
	// A floor below the since leaves it: a since never goes back.
	back := func(store.SetMember, store.MemberValue, store.MemberCursor, bool) store.Floor {
		return store.Floor{Since: 5}
	}
	if _, err := s.SetMembers(ctx, fam, 450, false, []store.SetMember{{Key: "acme", Zone: "Europe/Oslo"}}, back); err != nil {
		t.Fatal(err)
	}
	if ms, _, _ = s.Members(ctx, fam, []string{"acme"}); ms[0].Since != 2010 || ms[0].Zone != "Europe/Oslo" {
		t.Errorf("since %d in %q after a floor of 5; want 2010 kept, Europe/Oslo", ms[0].Since, ms[0].Zone)
	}
	// A cursor that never settles ends in ErrMembersBusy, with nothing written.
	busy := func(store.SetMember, store.MemberValue, store.MemberCursor, bool) store.Floor {
		rdb.HSet(ctx, cursors, "acme", fmt.Sprintf("%d 0", time.Now().UnixNano()))
		return store.Floor{Since: 1}
	}
	if _, err := s.SetMembers(ctx, fam, 500, false, []store.SetMember{{Key: "acme"}}, busy); !errors.Is(err, store.ErrMembersBusy) {
		t.Errorf("SetMembers with a cursor moving each time: %v; want ErrMembersBusy", err)
	}
	if ms, _, _ = s.Members(ctx, fam, []string{"acme"}); ms[0].Zone != "Europe/Oslo" {
		t.Errorf("a refused write moved the member to %q", ms[0].Zone)
	}
	// The task named decides between the floors when the write lands.
	task := redistest.Uniq("task")
	byTask := func(store.SetMember, store.MemberValue, store.MemberCursor, bool) store.Floor {
		return store.Floor{Since: 0, Queue: "default", TaskID: task, SinceIfTask: 5000}
	}
	if _, err := s.SetMembers(ctx, fam, 600, false, []store.SetMember{{Key: "acme", Zone: "Europe/Paris"}}, byTask); err != nil {
		t.Fatal(err)
	}
	if ms, _, _ = s.Members(ctx, fam, []string{"acme"}); ms[0].Since != 2010 {
		t.Errorf("since %d without the task; want 2010 kept", ms[0].Since)
	}
	rdb.Set(ctx, pipeline.TaskKey("default", task), "1", time.Minute)
	if _, err := s.SetMembers(ctx, fam, 700, false, []store.SetMember{{Key: "acme", Zone: "Asia/Tokyo"}}, byTask); err != nil {
		t.Fatal(err)
	}
	if ms, _, _ = s.Members(ctx, fam, []string{"acme"}); ms[0].Since != 5000 {
		t.Errorf("since %d with the task; want 5000", ms[0].Since)
	}
}

// The leader's commit is fenced, and does not give a deleted member its
// cursor back.
func TestCommitFamilyIsFencedAndSkipsDeletedMembers(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	const fam = "weekly"
	hold(t, s, ctx, "r0|1")
	s.SetMembers(ctx, fam, 100, false, []store.SetMember{{Key: "acme"}, {Key: "globex"}}, nil)
	if ok, err := s.DeleteMember(ctx, fam, "globex"); !ok || err != nil {
		t.Fatalf("DeleteMember = %v, %v", ok, err)
	}
	cursor := store.EncodeCursor(store.MemberCursor{Slot: 500, Offset: 3600}, false)
	commits := []store.MemberCommit{{Member: "acme", Cursor: cursor}, {Member: "globex", Cursor: cursor}}
	if err := s.CommitFamily(ctx, "r0|1", fam, store.Commit{Name: fam}, commits, "|", "500"); err != nil {
		t.Fatal(err)
	}
	_, _, cs, hasCursor, _ := s.MemberStates(ctx, fam, []string{"acme", "globex"})
	if !hasCursor[0] || cs[0].Slot != 500 || cs[0].Offset != 3600 || hasCursor[1] {
		t.Errorf("cursors %+v %v; want acme's only", cs, hasCursor)
	}
	if bc, _ := s.BucketCursors(ctx, fam, []string{"|"}); bc[0] != 500 {
		t.Errorf("bucket cursor %d, want 500", bc[0])
	}
	hold(t, s, ctx, "r1|2")
	if err := s.CommitFamily(ctx, "r0|1", fam, store.Commit{Name: fam}, commits, "|", "900"); err != store.ErrNotLeader {
		t.Errorf("a zombie's commit: %v, want ErrNotLeader", err)
	}
	if n, _ := redistest.Shared(t).Exists(ctx, s.Keys.Family(fam).Members).Result(); n != 1 {
		t.Error("the family's members are gone")
	}
}

func TestForgetRemovesAFamilysMembers(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	s.SetMembers(ctx, "gone", 100, false, []store.SetMember{{Key: "acme", Zone: "Asia/Tokyo"}, {Key: "globex", Paused: true}}, nil)
	s.SetMembers(ctx, "kept", 100, false, []store.SetMember{{Key: "acme"}}, nil)
	if _, err := s.Forget(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	rdb := redistest.Shared(t)
	if keys, _ := redistest.Keys(ctx, rdb, s.Keys.Family("gone").Prefix+"*"); len(keys) != 0 {
		t.Errorf("keys of the forgotten family remain: %v", keys)
	}
	if n, _ := s.MemberCount(ctx, "kept"); n != 1 {
		t.Errorf("the other family has %d members, want 1", n)
	}
}
