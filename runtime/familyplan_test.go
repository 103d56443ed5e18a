package runtime

import (
	"context"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/internal/store"
)

// The floor after which a member's next slot lies: the last slot's
// instant, or the instant its local time has in the member's zone now.
func TestCursorFloor(t *testing.T) {
	t.Parallel()
	tokyo, _ := registry.LoadZone("Asia/Tokyo")
	ny, _ := registry.LoadZone("America/New_York")
	cursorIn := func(at time.Time) store.MemberCursor {
		_, off := at.Zone()
		return store.MemberCursor{Slot: at.Unix(), Offset: off}
	}
	thuTokyo := time.Date(2026, 3, 5, 9, 0, 0, 0, tokyo)
	thuNY := time.Date(2026, 3, 5, 9, 0, 0, 0, ny)
	fold2 := time.Date(2026, 11, 1, 6, 0, 0, 0, time.UTC).In(ny) // the second 01:00, EST
	for _, tt := range []struct {
		name   string
		cursor store.MemberCursor
		loc    *time.Location
		want   time.Time
	}{
		{"same zone", cursorIn(thuTokyo), tokyo, thuTokyo},
		{"east to west: the same local time later", cursorIn(thuTokyo), ny, thuNY},
		{"west to east: the instant", cursorIn(thuNY), tokyo, thuNY},
		{"second instant of a fold stays", cursorIn(fold2), ny, fold2},
	} {
		if got := cursorFloor(tt.cursor, tt.loc); !got.Equal(tt.want) {
			t.Errorf("%s: floor %s, want %s", tt.name, got, tt.want)
		}
	}
}

// A member's slots come from its own cursor: nothing at or before it,
// nothing before it was created, and grace and pause as for a schedule.
func TestFamilyCommitRecordsPerMember(t *testing.T) {
	t.Parallel()
	reg := registry.MustNew(registry.Schedule{Name: "weekly", Expr: "* * * * *", Per: "tenant",
		Handler: func(context.Context, registry.Occurrence) error { return nil }})
	fam, _ := reg.Lookup("weekly")
	s, _ := fam.ForMember("Asia/Tokyo", "")
	r := &Runtime{reg: reg, opts: Options{Namespace: "ns", HistoryLimit: 2}}
	b := &famBucket{fam: fam, key: store.BucketOf("Asia/Tokyo", ""), sched: s}
	now := time.Date(2026, 3, 5, 0, 3, 0, 0, time.UTC)
	var plans []*slotPlan
	for _, key := range []string{"a", "b", "c"} {
		p := planSlots(r.memberScope(fam, key), s, now.Add(-2*time.Minute), now.Add(-3*time.Minute), now, time.Hour)
		p.enqueue = nil
		for _, slot := range []time.Time{now.Add(-2 * time.Minute), now.Add(-time.Minute), now} {
			p.done = append(p.done, store.Rec{ID: p.scope.ID(slot), Slot: slot.Unix(), Outcome: string(OutcomeEnqueued), Score: slot.UnixMilli()})
		}
		p.cursor = now
		plans = append(plans, p)
	}
	commit, mcs, err := r.familyCommit(b, plans, []int64{0, 0, 0}, now)
	if err != nil {
		t.Fatal(err)
	}
	if commit.Counts[string(OutcomeEnqueued)] != 9 || len(commit.Recs) != 2 {
		t.Errorf("commit counts %v with %d records; want 9 enqueued, the newest 2 recorded", commit.Counts, len(commit.Recs))
	}
	for _, rec := range commit.Recs {
		if rec.Member == "" || rec.Slot != now.Unix() {
			t.Errorf("record %+v; want a member's newest slot", rec)
		}
	}
	if len(mcs) != 3 || mcs[0].Member != "a" || mcs[0].LastSlot != now.Unix() || mcs[0].Cursor != store.EncodeCursor(store.MemberCursor{Slot: now.Unix(), Offset: 9 * 3600}, false) {
		t.Errorf("member commits %+v", mcs)
	}
}
