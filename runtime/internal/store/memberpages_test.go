package store_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/belfry/belfry/internal/redistest"
	"github.com/belfry/belfry/runtime/internal/store"
)

// addMembers writes members with these keys to the family.
func addMembers(t *testing.T, s *store.Store, ctx context.Context, family string, keys ...string) {
	t.Helper()
	ms := make([]store.SetMember, len(keys))
	for i, k := range keys {
		ms[i] = store.SetMember{Key: k}
	}
	if _, err := s.SetMembers(ctx, family, 100, false, ms, nil); err != nil {
		t.Fatal(err)
	}
}

func numbered(format string, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf(format, i)
	}
	return keys
}

// wantEncoding fails the test unless Redis keeps the family's members in
// the encoding the test is about: a compact one ("listpack", "ziplist"
// before Redis 7) is returned whole by any HSCAN.
func wantEncoding(t *testing.T, s *store.Store, ctx context.Context, family string, compact bool) {
	t.Helper()
	enc, err := redistest.Shared(t).ObjectEncoding(ctx, s.Keys.Family(family).Members).Result()
	if err != nil {
		t.Fatal(err)
	}
	if isCompact := enc == "listpack" || enc == "ziplist"; isCompact != compact {
		t.Fatalf("the family's members are kept as a %s; the test needs compact=%v", enc, compact)
	}
}

// compactMost is the most members a hash may have and stay compact
// (hash-max-listpack-entries, called hash-max-ziplist-entries before
// Redis 7 and still answering to that name).
func compactMost(t *testing.T) int {
	t.Helper()
	cfg, err := redistest.Shared(t).ConfigGet(context.Background(), "hash-max-ziplist-entries").Result()
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(cfg["hash-max-ziplist-entries"])
	if err != nil {
		t.Fatalf("hash-max-ziplist-entries: %v", err)
	}
	return n
}

// pageThrough follows next cursors from the first page to the last,
// calling between after each page but the last, and counts how often each
// member was listed. Every page must hold at most limit members.
func pageThrough(t *testing.T, s *store.Store, ctx context.Context, family, substr string, limit int, between func()) (listed map[string]int, pages int) {
	t.Helper()
	listed = map[string]int{}
	for cursor := ""; ; {
		page, next, err := s.ScanMembers(ctx, family, cursor, substr, limit)
		if err != nil {
			t.Fatalf("page %d: %v", pages+1, err)
		}
		pages++
		if len(page) > limit {
			t.Fatalf("page %d asked for at most %d members has %d", pages, limit, len(page))
		}
		for _, m := range page {
			listed[m.Key]++
		}
		if next == "" {
			return listed, pages
		}
		if pages > 10000 {
			t.Fatal("paging does not end")
		}
		cursor = next
		if between != nil {
			between()
		}
	}
}

// onceEach fails the test unless each of want was listed exactly once
// and nothing else was listed more than once.
func onceEach(t *testing.T, listed map[string]int, want []string) {
	t.Helper()
	for _, k := range want {
		if listed[k] != 1 {
			t.Errorf("%s listed %d times, want once", k, listed[k])
		}
	}
	for k, n := range listed {
		if n > 1 {
			t.Errorf("%s listed %d times", k, n)
		}
	}
}

// A page holds at most the limit asked for, whether Redis keeps the
// family compact (where HSCAN returns it whole) or as a hash table, and
// the pages list every member once.
func TestMemberPagesHoldAtMostTheLimit(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		members int
		compact bool
	}{
		{100, true},
		{600, false},
	} {
		t.Run(fmt.Sprintf("%d members", tt.members), func(t *testing.T) {
			t.Parallel()
			s, ctx := setup(t)
			keys := numbered("t%03d", tt.members)
			addMembers(t, s, ctx, "reports", keys...)
			wantEncoding(t, s, ctx, "reports", tt.compact)
			for _, limit := range []int{1, 7, 10, tt.members, tt.members + 1} {
				listed, pages := pageThrough(t, s, ctx, "reports", "", limit, nil)
				onceEach(t, listed, keys)
				if least := (tt.members + limit - 1) / limit; pages > 2*least {
					t.Errorf("limit %d: %d members in %d pages; %d would hold them", limit, tt.members, pages, least)
				}
			}
		})
	}
}

// Members added and removed between pages: every member present from the
// first page to the last is listed exactly once, none twice, whether the
// family is compact, a hash table, or a hash table that grows (and is
// rehashed) while it is paged.
func TestMemberPagesUnderChanges(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name                string
		members             int
		compact             bool
		addEach, removeEach int
		limit               int
		// growAt adds this many members after the page of that number,
		// so that the table doubles between two pages: each bucket then
		// splits, and a step read again ends inside the range it covered
		// before.
		growAt map[int]int
	}{
		{"compact", 100, true, 2, 2, 10, nil},
		{"hash table", 600, false, 3, 3, 10, nil},
		{"growing hash table", 700, false, 40, 2, 10, nil},
		{"hash table, small pages", 600, false, 1, 1, 3, nil},
		{"hash table doubling, pages of one", 600, false, 0, 0, 1, map[int]int{40: 600, 400: 1500}},
		{"hash table doubling, pages of two", 600, false, 0, 1, 2, map[int]int{20: 600, 200: 1500}},
		// The whole compact hash was one step; read again, it is a hash
		// table's buckets, each inside that step's range.
		{"compact becoming a hash table, pages of one", 100, true, 0, 0, 1, map[int]int{30: compactMost(t)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, ctx := setup(t)
			keys := numbered("t%04d", tt.members)
			addMembers(t, s, ctx, "reports", keys...)
			wantEncoding(t, s, ctx, "reports", tt.compact)
			rnd := rand.New(rand.NewPCG(uint64(tt.members), uint64(tt.limit)))
			present := slices.Clone(keys)
			removed := map[string]bool{}
			added, page := 0, 0
			between := func() {
				page++
				var gone []string
				for range tt.removeEach {
					i := rnd.IntN(len(present))
					gone = append(gone, present[i])
					present = slices.Delete(present, i, i+1)
				}
				for _, k := range gone {
					removed[k] = true
					if ok, err := s.DeleteMember(ctx, "reports", k); err != nil || !ok {
						t.Fatalf("DeleteMember(%s) = %v, %v", k, ok, err)
					}
				}
				fresh := make([]string, tt.addEach+tt.growAt[page])
				for i := range fresh {
					// Keys that sort anywhere among the others.
					fresh[i] = fmt.Sprintf("t%04d-%d", rnd.IntN(tt.members), added)
					added++
				}
				addMembers(t, s, ctx, "reports", fresh...)
				present = append(present, fresh...)
			}
			listed, pages := pageThrough(t, s, ctx, "reports", "", tt.limit, between)
			var throughout []string
			for _, k := range keys {
				if !removed[k] {
					throughout = append(throughout, k)
				}
			}
			onceEach(t, listed, throughout)
			t.Logf("%d pages; %d members added and %d removed while paging", pages, added, len(removed))
			for at := range tt.growAt {
				if at >= pages {
					t.Errorf("the paging ended at page %d, before the growth after page %d", pages, at)
				}
			}
		})
	}
}

// A search lists every member whose key contains the substring once, in
// pages of at most the limit, and nothing else.
func TestMemberPagesOfASearch(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	keys := numbered("t%03d", 600)
	addMembers(t, s, ctx, "reports", keys...)
	var want []string
	for _, k := range keys {
		if strings.Contains(k, "1") {
			want = append(want, k)
		}
	}
	listed, _ := pageThrough(t, s, ctx, "reports", "1", 10, nil)
	onceEach(t, listed, want)
	if len(listed) != len(want) {
		t.Errorf("the search for 1 listed %d members, want %d", len(listed), len(want))
	}
	// A key is matched as it is: glob characters have no meaning.
	if page, _, err := s.ScanMembers(ctx, "reports", "", "t*", 10); err != nil || len(page) != 0 {
		t.Errorf("a search for t* found %d members, %v; want none", len(page), err)
	}
}

// A cursor handed out before pages were cut at the limit (a plain HSCAN
// cursor) still continues the listing; one never handed out is refused.
func TestMemberPageCursors(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	keys := numbered("t%03d", 600)
	addMembers(t, s, ctx, "reports", keys...)
	kv, plain, err := redistest.Shared(t).HScan(ctx, s.Keys.Family("reports").Members, 0, "", 20).Result()
	if err != nil || plain == 0 {
		t.Fatalf("HSCAN = %d, %v; want a cursor to a next step", plain, err)
	}
	listed := map[string]int{}
	for i := 0; i < len(kv); i += 2 {
		listed[kv[i]]++
	}
	for cursor := strconv.FormatUint(plain, 10); cursor != ""; {
		var page []store.MemberValue
		page, cursor, err = s.ScanMembers(ctx, "reports", cursor, "", 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range page {
			listed[m.Key]++
		}
	}
	onceEach(t, listed, keys)

	for _, bad := range []string{"not-a-cursor", "-3", "12-", "12-!!", "12-AAAA"} {
		if _, _, err := s.ScanMembers(ctx, "reports", bad, "", 10); !errors.Is(err, store.ErrBadCursor) {
			t.Errorf("cursor %q: %v; want ErrBadCursor", bad, err)
		}
	}
}
