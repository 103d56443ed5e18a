package enginetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
)

// A family's member changes take effect at a floor, never before it, and
// miss nothing after it. A member added runs from its first slot after the
// add, that one included. A member moved east (UTC to Tokyo) of a
// per-second family runs every slot once across the move, the later ones in
// its new zone, none of them in it before the move. A member moved west
// (Tokyo to New York) waits until its new zone's clock passes the local
// time of its last run, hours away: no slot runs for it meanwhile, while
// the family's other members run on.
func familyChangeFloors(t *testing.T, h Harness) {
	ctx := context.Background()
	const family = "reports"
	exec := &executions{}
	r := single(t, h, exec, registry.Schedule{Name: family, Expr: "* * * * * *", Zone: "UTC", Per: "tenant"})
	s := r.rt.Registry().Schedules()[0]
	fams := r.rt.Families()
	set := func(m runtime.Member) (before, after time.Time) {
		before = time.Now()
		if _, err := fams.Set(ctx, family, m); err != nil {
			t.Fatalf("Set(%+v): %v", m, err)
		}
		return before, time.Now()
	}
	if err := fams.SetMany(ctx, family, []runtime.Member{{Key: "steady"}, {Key: "east", Zone: "UTC"},
		{Key: "west", Zone: "Asia/Tokyo"}}); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"steady", "east", "west"} {
		waitFor(t, 10*time.Second, m+"'s first runs", exec.ranAfter(family, m, time.Time{}, 2))
	}
	addBefore, addAfter := set(runtime.Member{Key: "late"})
	eastBefore, eastAfter := set(runtime.Member{Key: "east", Zone: "Asia/Tokyo"})
	_, westAfter := set(runtime.Member{Key: "west", Zone: "America/New_York"})
	// The leader sees a change within about a second; seen adds a loaded
	// machine's slack, and the runs waited for are past it for every change.
	const seen = 3 * time.Second
	settled := westAfter.Add(seen)
	waitFor(t, 10*time.Second, "the added member's runs", exec.ranAfter(family, "late", settled, 3))
	waitFor(t, 10*time.Second, "the moved member's runs", exec.ranAfter(family, "east", settled, 3))
	waitFor(t, 10*time.Second, "the other members' runs", exec.ranAfter(family, "steady", settled, 3))

	late := exec.scheduled(family, "late")
	if first := late[0].Slot; !first.After(addBefore) || first.After(s.Next(addAfter)) {
		t.Errorf("the member added between %s and %s first ran slot %s; want its first slot after the add",
			stampMilli(addBefore), stampMilli(addAfter), stamp(first))
	}
	assertOncePerSlot(t, s, late)

	east := exec.scheduled(family, "east")
	assertOncePerSlot(t, s, east)
	for _, occ := range east {
		switch {
		case occ.Zone == "Asia/Tokyo" && !occ.Slot.After(eastBefore):
			t.Errorf("slot %s ran in the member's new zone before the change at %s", stamp(occ.Slot), stampMilli(eastBefore))
		case occ.Zone != "Asia/Tokyo" && occ.Slot.After(eastAfter.Add(seen)):
			t.Errorf("slot %s ran in zone %q well after the move to Asia/Tokyo", stamp(occ.Slot), occ.Zone)
		}
	}

	for _, occ := range exec.scheduled(family, "west") {
		if occ.Zone == "America/New_York" {
			t.Errorf("slot %s ran in New York although the member's last run, in Tokyo, was later in local time", stamp(occ.Slot))
		}
		if occ.Slot.After(westAfter.Add(seen)) {
			t.Errorf("slot %s of the member moved west ran after the move", stamp(occ.Slot))
		}
	}
	west, err := fams.Get(ctx, family, "west")
	if err != nil {
		t.Fatal(err)
	}
	infos, err := fams.Infos(ctx, family, []runtime.Member{west})
	if err != nil || len(infos) != 1 {
		t.Fatalf("Infos(west) = %v, %v", infos, err)
	}
	if next := infos[0].Next; next.Before(time.Now().Add(time.Hour)) {
		t.Errorf("the member moved west next runs at %s; want after New York's clock passes its last run's local time", next.UTC())
	}
}

func stampMilli(at time.Time) string { return at.UTC().Format("15:04:05.000") }

// Reads of records and members return pages no larger than asked for: the
// newest records, at most the limit, newest first; a family's members in
// pages of about the limit with a cursor to the next, which together list
// every member.
func boundedReads(t *testing.T, h Harness) {
	ctx := context.Background()
	const family, limit = "reports", 10
	exec := &executions{}
	r := single(t, h, exec, registry.Schedule{Name: "nightly", Expr: "17 3 * * *"},
		registry.Schedule{Name: family, Expr: "0 0 1 1 *", Per: "tenant"})
	for range 5 {
		if _, err := r.rt.Trigger(ctx, "nightly", ""); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "five runs now to be recorded", func() bool {
		hist, _ := r.rt.History(ctx, "nightly", 100)
		return len(hist) == 5
	})
	hist, err := r.rt.History(ctx, "nightly", 3)
	if err != nil || len(hist) != 3 {
		t.Fatalf("History with limit 3 of 5 records: %d records, %v", len(hist), err)
	}
	for i := 1; i < len(hist); i++ {
		if hist[i].EnqueuedAt.After(hist[i-1].EnqueuedAt) {
			t.Errorf("History is not newest first: %s before %s", stampMilli(hist[i-1].EnqueuedAt), stampMilli(hist[i].EnqueuedAt))
		}
	}

	// Families.List promises pages of about the limit, and the case checks
	// that on a family of many pages. (The Redis engine returns a family
	// small enough for one compact hash, up to hash-max-listpack-entries,
	// whole whatever the limit: docs/engines.md.)
	const members = 600
	ms := make([]runtime.Member, members)
	for i := range ms {
		ms[i] = runtime.Member{Key: fmt.Sprintf("t%03d", i)}
	}
	fams := r.rt.Families()
	if err := fams.SetMany(ctx, family, ms); err != nil {
		t.Fatal(err)
	}
	if n, err := fams.Count(ctx, family); err != nil || n != members {
		t.Errorf("Count = %d, %v; want %d", n, err, members)
	}
	listed := map[string]int{}
	cursor, pages := "", 0
	for {
		page, next, err := fams.List(ctx, family, cursor, limit)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if len(page) > 2*limit {
			t.Fatalf("a page asked for %d members has %d", limit, len(page))
		}
		if next != "" && len(page) == 0 && pages > members {
			t.Fatal("paging does not end")
		}
		for _, m := range page {
			listed[m.Key]++
		}
		if next == "" {
			break
		}
		cursor = next
	}
	t.Logf("%d members listed in %d pages asked for %d each", len(listed), pages, limit)
	if len(listed) != members {
		t.Errorf("paging listed %d members, want all %d", len(listed), members)
	}
	if pages < members/(2*limit) {
		t.Errorf("%d members came in %d pages of about %d", members, pages, limit)
	}
	page, _, err := fams.Search(ctx, family, "t1", "", limit)
	if err != nil || len(page) > 2*limit {
		t.Errorf("Search with limit %d: %d members, %v", limit, len(page), err)
	}
	for _, m := range page {
		if !strings.Contains(m.Key, "t1") {
			t.Errorf("Search for t1 gave %s", m.Key)
		}
	}
}
