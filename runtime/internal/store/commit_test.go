package store_test

import (
	"context"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/belfry/belfry/internal/redistest"
	"github.com/belfry/belfry/runtime/internal/store"
	"github.com/redis/go-redis/v9"
)

// A commit writes a batch's cursors, last IDs and counters with one read
// and one write per hash; what it leaves in Redis is what its schedules
// would leave each committed in a script of its own: a schedule that comes
// twice (a per-second schedule dispatched again while its commit ran), a
// record a fast worker wrote first, counters and times already there and
// names in asynq's category:action form.
func TestABatchCommitsAsIfEachScheduleCameAlone(t *testing.T) {
	t.Parallel()
	rdb := redistest.Shared(t)
	ctx := context.Background()
	items := func() []store.Commit {
		rec := func(name string, slot int64, outcome string) store.Rec {
			return store.Rec{ID: "cron:" + name + ":" + time.Unix(slot, 0).UTC().Format("150405"), Slot: slot,
				At: slot*1000 + 250, Outcome: outcome, Score: slot * 1000}
		}
		return []store.Commit{
			{Name: "tick", Cursor: 1009, LastID: rec("tick", 1009, "").ID, Recs: []store.Rec{rec("tick", 1009, "enqueued")},
				Counts: map[string]int64{"enqueued": 1, "last_enqueue": 1009250}},
			{Name: "report:daily", Cursor: 1000, Recs: []store.Rec{rec("report:daily", 999, "missed"), rec("report:daily", 1000, "enqueued")},
				Counts: map[string]int64{"missed": 1, "enqueued": 1, "last_enqueue": 1000250}},
			{Name: "tick", Cursor: 1010, LastID: rec("tick", 1010, "").ID, Recs: []store.Rec{rec("tick", 1010, "enqueued")},
				Counts: map[string]int64{"enqueued": 1, "last_enqueue": 1010250}},
			{Name: "behind", Cursor: 990, LastID: rec("behind", 990, "").ID, Recs: []store.Rec{rec("behind", 990, "enqueued")},
				Counts: map[string]int64{"enqueued": 1, "last_enqueue": 990250}},
			{Name: "quiet", Cursor: 1000},
			// Out of order (an earlier batch's step after a later one's):
			// neither the cursor nor the last ID goes back.
			{Name: "late", Cursor: 1020, LastID: rec("late", 1020, "").ID},
			{Name: "late", Cursor: 1015, LastID: rec("late", 1015, "").ID},
		}
	}
	// The same state before each: a worker's record of tick's 1010 slot,
	// counters, and a cursor and last ID already past behind's commit.
	prepare := func(s *store.Store) {
		hold(t, s, ctx, "r0|1")
		if err := s.RecordExecution(ctx, store.Execution{ID: "cron:tick:001650", Schedule: "tick", Slot: time.Unix(1010, 0),
			Fields: []any{"outcome", "running", "started_at", 1010300}, At: time.Unix(1010, 300000000)}); err != nil {
			t.Fatal(err)
		}
		rdb.HSet(ctx, s.Keys.Counters(), "tick", store.FormatCounters(map[string]int64{"enqueued": 5}),
			"behind", store.FormatCounters(map[string]int64{"last_enqueue": 995000}))
		rdb.HSet(ctx, s.Keys.Cursors, "behind", 995)
		rdb.HSet(ctx, s.Keys.LastID, "behind", "cron:behind:995")
	}
	batch := store.New(rdb, redistest.Uniq("batch"), 3, time.Hour)
	prepare(batch)
	if err := batch.Commit(ctx, "r0|1", items()); err != nil {
		t.Fatal(err)
	}
	alone := store.New(rdb, redistest.Uniq("alone"), 3, time.Hour)
	prepare(alone)
	for _, item := range items() {
		if err := alone.Commit(ctx, "r0|1", []store.Commit{item}); err != nil {
			t.Fatal(err)
		}
	}
	got, want := dump(t, rdb, batch.Keys.Prefix), dump(t, rdb, alone.Keys.Prefix)
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if got[k] != want[k] {
			t.Errorf("%s: batch %q, alone %q", k, got[k], want[k])
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: batch %q, alone none", k, got[k])
		}
	}
	// And what they leave is right.
	for key, v := range map[string]string{
		"cursors":              "behind=995 late=1020 quiet=1000 report:daily=1000 tick=1010",
		"lastid":               "behind=cron:behind:995 late=cron:late:001700 tick=cron:tick:001650",
		"occ:cron:tick:001650": "attempt=0 enqueued_at=1010250 id=cron:tick:001650 manual=0 outcome=running schedule=tick slot=1010 started_at=1010300 (expires)",
		"occ:cron:tick:001649": "enqueued_at=1009250 id=cron:tick:001649 manual=0 outcome=enqueued schedule=tick slot=1009 (expires)",
		"hist:report:daily":    "cron:report:daily:001639=999000 cron:report:daily:001640=1000000",
		// A missed slot was never enqueued: its record says when it was
		// recorded, not an enqueue time.
		"occ:cron:report:daily:001639": "id=cron:report:daily:001639 manual=0 outcome=missed recorded_at=999250 schedule=report:daily slot=999 (expires)",
	} {
		if got[key] != v {
			t.Errorf("%s: %q, want %q", key, got[key], v)
		}
	}
	stats, err := batch.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantCounters := map[string]map[string]int64{
		"tick":         {"enqueued": 7, "last_enqueue": 1010250},
		"behind":       {"enqueued": 1, "last_enqueue": 995000}, // a count is added, a time only raised
		"report:daily": {"missed": 1, "enqueued": 1, "last_enqueue": 1000250},
	}
	if !reflect.DeepEqual(stats, wantCounters) {
		t.Errorf("counters %v, want %v", stats, wantCounters)
	}
}

// dump reads every key under prefix as "field=value ..." sorted, with
// each record's TTL rounded away.
func dump(t *testing.T, rdb redis.UniversalClient, prefix string) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	keys, err := redistest.Keys(ctx, rdb, prefix+"*")
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range keys {
		var pairs []string
		switch rdb.Type(ctx, key).Val() {
		case "hash":
			for f, v := range rdb.HGetAll(ctx, key).Val() {
				pairs = append(pairs, f+"="+v)
			}
		case "zset":
			for _, z := range rdb.ZRangeWithScores(ctx, key, 0, -1).Val() {
				pairs = append(pairs, z.Member.(string)+"="+strconv.FormatFloat(z.Score, 'f', -1, 64))
			}
		default:
			pairs = append(pairs, rdb.Get(ctx, key).Val())
		}
		slices.Sort(pairs)
		if rdb.TTL(ctx, key).Val() > 0 {
			pairs = append(pairs, "(expires)")
		}
		out[strings.TrimPrefix(key, prefix)] = strings.Join(pairs, " ")
	}
	return out
}

// A batch may carry more records than Lua's unpack takes in one call (50
// schedules each catching up hundreds of slots after an outage): it
// commits, whether or not a worker got to one of them first.
func TestABatchOfManyRecordsCommits(t *testing.T) {
	t.Parallel()
	rdb := redistest.Shared(t)
	ctx := context.Background()
	for _, workerFirst := range []bool{false, true} {
		s := store.New(rdb, redistest.Uniq("many"), 1000, time.Hour)
		hold(t, s, ctx, "r0|1")
		var items []store.Commit
		for i := range store.CommitChunk {
			name := "s" + strconv.Itoa(i)
			c := store.Commit{Name: name, Cursor: 1300, Counts: map[string]int64{"enqueued": 300}}
			for slot := int64(1001); slot <= 1300; slot++ {
				c.Recs = append(c.Recs, store.Rec{ID: "cron:" + name + ":" + strconv.FormatInt(slot, 10), Slot: slot,
					At: slot * 1000, Outcome: "enqueued", Score: slot * 1000})
			}
			items = append(items, c)
		}
		last := items[len(items)-1].Recs[299].ID
		if workerFirst {
			if err := s.RecordExecution(ctx, store.Execution{ID: last, Schedule: items[len(items)-1].Name, Slot: time.Unix(1300, 0),
				Fields: []any{"outcome", "running"}, At: time.Unix(1300, 0)}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Commit(ctx, "r0|1", items); err != nil {
			t.Fatalf("a batch of %d records (a worker first: %v): %v", len(items)*300, workerFirst, err)
		}
		want := "enqueued"
		if workerFirst {
			want = "running"
		}
		if got := rdb.HGet(ctx, s.Keys.Occurrence(last), "outcome").Val(); got != want {
			t.Errorf("a worker first %v: the last record's outcome %q, want %q", workerFirst, got, want)
		}
		if n := rdb.ZCard(ctx, s.Keys.History("s0")).Val(); n != 300 {
			t.Errorf("s0's history holds %d records, want 300", n)
		}
	}
}
