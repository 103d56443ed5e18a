package enginetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/core"
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
	set := func(m core.Member) (before, after time.Time) {
		before = time.Now()
		if _, err := fams.Set(ctx, family, m); err != nil {
			t.Fatalf("Set(%+v): %v", m, err)
		}
		return before, time.Now()
	}
	if err := fams.SetMany(ctx, family, []core.Member{{Key: "steady"}, {Key: "east", Zone: "UTC"},
		{Key: "west", Zone: "Asia/Tokyo"}}); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"steady", "east", "west"} {
		waitFor(t, 10*time.Second, m+"'s first runs", exec.ranAfter(family, m, time.Time{}, 2))
	}
	addBefore, addAfter := set(core.Member{Key: "late"})
	eastBefore, eastAfter := set(core.Member{Key: "east", Zone: "Asia/Tokyo"})
	_, westAfter := set(core.Member{Key: "west", Zone: "America/New_York"})
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
	infos, err := fams.Infos(ctx, family, []core.Member{west})
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
// pages of at most the limit with a cursor to the next, which together
// list every member once, also while members are added and removed
// between pages, whether the family is small or large (an engine may keep
// a small one otherwise: Redis keeps a hash of up to
// hash-max-listpack-entries compact, and HSCAN returns it whole).
func boundedReads(t *testing.T, h Harness) {
	ctx := context.Background()
	const limit = 10
	exec := &executions{}
	r := single(t, h, exec, registry.Schedule{Name: "nightly", Expr: "17 3 * * *"},
		registry.Schedule{Name: "reports", Expr: "0 0 1 1 *", Per: "tenant"},
		registry.Schedule{Name: "digests", Expr: "0 0 1 1 *", Per: "tenant"})
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

	fams := r.rt.Families()
	for _, tt := range []struct {
		family  string
		members int
	}{{"reports", 600}, {"digests", 100}} {
		keys := make([]string, tt.members)
		ms := make([]core.Member, tt.members)
		for i := range ms {
			keys[i] = fmt.Sprintf("t%03d", i)
			ms[i] = core.Member{Key: keys[i]}
		}
		if err := fams.SetMany(ctx, tt.family, ms); err != nil {
			t.Fatal(err)
		}
		if n, err := fams.Count(ctx, tt.family); err != nil || n != int64(tt.members) {
			t.Errorf("%s: Count = %d, %v; want %d", tt.family, n, err, tt.members)
		}
		listed, pages := pageMembers(t, fams, tt.family, "", limit, nil)
		t.Logf("%s: %d members listed in %d pages asked for %d each", tt.family, len(listed), pages, limit)
		listedOnce(t, tt.family, listed, keys)
		if most := 2 * ((tt.members + limit - 1) / limit); pages > most {
			t.Errorf("%s: %d members came in %d pages of at most %d", tt.family, tt.members, pages, limit)
		}

		var matching []string
		for _, k := range keys {
			if strings.Contains(k, "t1") {
				matching = append(matching, k)
			}
		}
		found, _ := pageMembers(t, fams, tt.family, "t1", limit, nil)
		listedOnce(t, tt.family+", Search for t1", found, matching)
		for k := range found {
			if !strings.Contains(k, "t1") {
				t.Errorf("%s: Search for t1 gave %s", tt.family, k)
			}
		}

		// Between pages one member is removed and one added: every member
		// there from the first page to the last is listed once.
		removed := map[string]bool{}
		between := func(page int) {
			gone := keys[(page*37)%len(keys)]
			if !removed[gone] {
				removed[gone] = true
				if err := fams.Delete(ctx, tt.family, gone); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := fams.Set(ctx, tt.family, core.Member{Key: fmt.Sprintf("t%03d-new", page)}); err != nil {
				t.Fatal(err)
			}
		}
		listed, _ = pageMembers(t, fams, tt.family, "", limit, between)
		var throughout []string
		for _, k := range keys {
			if !removed[k] {
				throughout = append(throughout, k)
			}
		}
		listedOnce(t, tt.family+", changing", listed, throughout)
	}
}

// pageMembers lists a family's members whose keys contain substr, page
// after page of at most limit, calling between (if not nil) with the
// number of each page but the last after it, and counts how often each
// member was listed.
func pageMembers(t *testing.T, fams *core.Families, family, substr string, limit int, between func(page int)) (listed map[string]int, pages int) {
	t.Helper()
	ctx := context.Background()
	listed = map[string]int{}
	for cursor := ""; ; {
		page, next, err := fams.Search(ctx, family, substr, cursor, limit)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if len(page) > limit {
			t.Fatalf("%s: page %d asked for at most %d members has %d", family, pages, limit, len(page))
		}
		for _, m := range page {
			listed[m.Key]++
		}
		if next == "" {
			return listed, pages
		}
		if pages > 10000 {
			t.Fatalf("%s: paging does not end", family)
		}
		cursor = next
		if between != nil {
			between(pages)
		}
	}
}

// listedOnce fails the test unless each of want was listed once and
// nothing was listed twice.
func listedOnce(t *testing.T, what string, listed map[string]int, want []string) {
	t.Helper()
	missing := 0
	for _, k := range want {
		if listed[k] == 0 {
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("%s: %d of %d members never listed", what, missing, len(want))
	}
	for k, n := range listed {
		if n > 1 {
			t.Errorf("%s: %s listed %d times", what, k, n)
		}
	}
}
