package core

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

// A change of zone or expression moves a member's next run to the new
// schedule's slot nearest the one it replaces, and never adds a run: in
// each case the member's next run (the new schedule's first slot after
// the floor) is the one the rule in familychange.go names.
func TestChangeFloorMovesTheNextRunAndAddsNone(t *testing.T) {
	t.Parallel()
	ny, _ := registry.LoadZone("America/New_York")
	fam := registry.MustNew(registry.Schedule{Name: "report", Expr: "0 9 * * MON", Zone: "UTC", Per: "tenant",
		Handler: func(context.Context, registry.Occurrence) error { return nil }}).Schedules()[0]
	sched := func(zone, expr string) *registry.Schedule {
		s, err := fam.ForMember(zone, expr)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	cursorAt := func(at time.Time) *store.MemberCursor {
		_, off := at.Zone()
		return &store.MemberCursor{Slot: at.Unix(), Offset: off}
	}
	utc := func(d, h, m int) time.Time { return time.Date(2026, 3, d, h, m, 0, 0, time.UTC) } // 2 March 2026 is a Monday
	created := utc(1, 12, 0)
	for _, tt := range []struct {
		name     string
		from, to *registry.Schedule
		cursor   *store.MemberCursor // nil: the member never had a slot
		now      time.Time
		want     time.Time
	}{
		{"weekly 09:00 moved to 10:00 after this Monday's run", sched("", "0 9 * * MON"), sched("", "0 10 * * MON"),
			cursorAt(utc(2, 9, 0)), utc(2, 9, 30), utc(9, 10, 0)},
		{"weekly 09:00 moved to 10:00 before this Monday's run", sched("", "0 9 * * MON"), sched("", "0 10 * * MON"),
			cursorAt(utc(23, 9, 0).AddDate(0, -1, 0)), utc(2, 8, 30), utc(2, 10, 0)},
		{"daily made weekly on a Wednesday: no slot before the change", sched("", "0 9 * * *"), sched("", "0 9 * * MON"),
			cursorAt(utc(4, 9, 0)), utc(4, 10, 0), utc(9, 9, 0)},
		{"weekly made daily on a Wednesday: the moved run first", sched("", "0 9 * * MON"), sched("", "0 9 * * *"),
			cursorAt(utc(2, 9, 0)), utc(4, 10, 0), utc(9, 9, 0)},
		{"daily made hourly: the moved run first", sched("", "0 9 * * *"), sched("", "0 * * * *"),
			cursorAt(utc(4, 9, 0)), utc(4, 10, 30), utc(5, 9, 0)},
		{"New York to Tokyo on a Wednesday: Monday in Tokyo, not a week later", sched("America/New_York", ""), sched("Asia/Tokyo", ""),
			cursorAt(time.Date(2026, 3, 2, 9, 0, 0, 0, ny)), utc(4, 10, 0), utc(9, 0, 0)},
		{"Tokyo to New York after Monday in Tokyo: not Monday again in New York", sched("Asia/Tokyo", ""), sched("America/New_York", ""),
			cursorAt(utc(2, 0, 0)), utc(2, 1, 0), time.Date(2026, 3, 9, 9, 0, 0, 0, ny)},
		{"never ran: the first slot after the change nearest the one replaced", sched("", "0 9 * * MON"), sched("", "0 10 * * MON"),
			nil, utc(2, 8, 30), utc(2, 10, 0)},
		{"a change within a second: the same", sched("", "0 9 * * MON"), sched("", "0 10 * * MON"),
			cursorAt(utc(2, 9, 0)), utc(2, 9, 30).Add(700 * time.Millisecond), utc(9, 10, 0)},
		{"a tie between two slots goes to the later", sched("", "0 12 * * *"), sched("", "0 0 * * *"),
			cursorAt(utc(2, 12, 0)), utc(2, 13, 0), utc(4, 0, 0)},
		{"New York daily moved to 02:30 before spring forward: the skipped hour's slot is nearest",
			sched("America/New_York", "0 9 * * *"), sched("America/New_York", "30 2 * * *"),
			cursorAt(time.Date(2026, 3, 7, 9, 0, 0, 0, ny)), utc(7, 15, 0),
			sched("America/New_York", "30 2 * * *").Next(time.Date(2026, 3, 8, 0, 0, 0, 0, ny))},
	} {
		var cur store.MemberCursor
		if tt.cursor != nil {
			cur = *tt.cursor
		}
		due, floor, _ := changeFloors(tt.from, tt.to, created, cur, tt.cursor != nil, tt.now)
		if !due.IsZero() {
			t.Errorf("%s: slot %s due at the change; want none", tt.name, due.UTC())
		}
		if got := tt.to.Next(floor); !got.Equal(tt.want) {
			t.Errorf("%s: next run %s, want %s", tt.name, got.UTC().Format(time.RFC3339), tt.want.UTC().Format(time.RFC3339))
		}
	}
	// The old slot due at the change and not yet shown handled: had (its
	// task in asynq), the run after it moves; not had, that slot itself
	// moves, even to a slot already due.
	for _, tt := range []struct {
		name              string
		from, to          *registry.Schedule
		cursor            *store.MemberCursor
		now               time.Time
		due, ifHad, ifNot time.Time
	}{
		{"09:00 moved to 10:00 as 09:00 comes due", sched("", "0 9 * * MON"), sched("", "0 10 * * MON"),
			cursorAt(utc(23, 9, 0).AddDate(0, -1, 0)), utc(2, 9, 0).Add(300 * time.Millisecond),
			utc(2, 9, 0), utc(9, 10, 0), utc(2, 10, 0)},
		{"09:00 moved to 08:00 with no leader since 07:00: 08:00 is due, run or recorded missed", sched("", "0 9 * * MON"), sched("", "0 8 * * MON"),
			cursorAt(utc(23, 9, 0).AddDate(0, -1, 0)), utc(2, 9, 30),
			utc(2, 9, 0), utc(9, 8, 0), utc(2, 8, 0)},
		{"Tokyo to New York as Tokyo's 09:00 comes due: had, its local time holds", sched("Asia/Tokyo", ""), sched("America/New_York", ""),
			cursorAt(utc(23, 0, 0).AddDate(0, -1, 0)), utc(2, 0, 0).Add(300 * time.Millisecond),
			utc(2, 0, 0), time.Date(2026, 3, 9, 9, 0, 0, 0, ny), time.Date(2026, 3, 2, 9, 0, 0, 0, ny)},
	} {
		due, ifHad, ifNot := changeFloors(tt.from, tt.to, created, *tt.cursor, true, tt.now)
		if !due.Equal(tt.due) || !tt.to.Next(ifHad).Equal(tt.ifHad) || !tt.to.Next(ifNot).Equal(tt.ifNot) {
			t.Errorf("%s: due %s, next run if had %s, if not %s; want %s, %s, %s", tt.name, due.UTC(),
				tt.to.Next(ifHad).UTC(), tt.to.Next(ifNot).UTC(), tt.due.UTC(), tt.ifHad.UTC(), tt.ifNot.UTC())
		}
	}
}
