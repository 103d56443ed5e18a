package store_test

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/belfry/belfry/internal/redistest"
	"github.com/belfry/belfry/runtime/internal/store"
	"github.com/redis/go-redis/v9"
)

// Counters in the old layout ("<schedule>:<counter>" fields of <ns>:stats,
// which a replica of an older version still writes during an upgrade) are
// folded into the counters hash by the first read: counts added, last
// times kept at the later, the first seen at the earlier, a counter this
// version does not know dropped, and the old hash gone.
func TestAReadFoldsTheOldLayoutIn(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	rdb := redistest.Shared(t)
	rdb.HSet(ctx, s.Keys.Stats, "a:enqueued", 2, "a:last_enqueue", 100, "a:first_seen", 50, "a:weird", 9,
		"b:succeeded", 1, "job:x:failed", 4)
	rdb.HSet(ctx, s.Keys.Counters(), "a", store.FormatCounters(map[string]int64{"enqueued": 3, "last_enqueue": 200, "first_seen": 70}))
	fields := []string{"enqueued", "last_enqueue", "first_seen", "succeeded", "failed"}
	got, err := s.StatFields(ctx, []string{"a", "b", "job:x", "none"}, fields)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]int64{{5, 200, 50, 0, 0}, {0, 0, 0, 1, 0}, {0, 0, 0, 0, 4}, {0, 0, 0, 0, 0}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("counters %v, want %v", got, want)
	}
	if n, _ := rdb.Exists(ctx, s.Keys.Stats).Result(); n != 0 {
		t.Errorf("the old layout's hash is still there")
	}
}

// While a replica of the older version goes on counting in the old
// layout, every read sees every count written before it began, once: a
// count is never in both hashes nor in neither, so what is read never goes
// back (a Prometheus counter that did would read as a reset).
func TestCountingInTheOldLayoutDuringReadsNeverGoesBack(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	rdb := redistest.Shared(t)
	const counts = 600
	var wg sync.WaitGroup
	written := make(chan struct{})
	wg.Go(func() {
		defer close(written)
		for range counts {
			if err := rdb.HIncrBy(ctx, s.Keys.Stats, "tick:succeeded", 1).Err(); err != nil {
				t.Error(err)
				return
			}
		}
	})
	readers := make([][]int64, 3)
	for r := range readers {
		wg.Go(func() {
			// Reads while the writer counts, and one after it is done,
			// which must see every count.
			for last := false; !last; {
				select {
				case <-written:
					last = true
				default:
				}
				got, err := s.StatFields(ctx, []string{"tick"}, []string{"succeeded"})
				if err != nil {
					t.Error(err)
					return
				}
				readers[r] = append(readers[r], got[0][0])
			}
		})
	}
	wg.Wait()
	for r, seen := range readers {
		if !slices.IsSorted(seen) {
			t.Errorf("reader %d went back: %v", r, seen)
		}
		if len(seen) == 0 || seen[len(seen)-1] != counts {
			t.Errorf("reader %d ended at %v, want %d", r, seen[max(0, len(seen)-1):], counts)
		}
	}
}

// The layout only grows at its end: a value of an older version, with
// fewer counters, reads 0 for the rest; one of a newer version keeps its
// extra counters when this one rewrites it.
func TestAValueOfAnotherVersionKeepsWhatItHolds(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	rdb := redistest.Shared(t)
	hold(t, s, ctx, "r0|1")
	newer := store.FormatCounters(map[string]int64{"enqueued": 1}) + ",7,8"
	rdb.HSet(ctx, s.Keys.Counters(), "older", "1,2", "newer", newer)
	got, err := s.StatFields(ctx, []string{"older", "newer"}, []string{"enqueued", "manual", "missed"})
	if err != nil {
		t.Fatal(err)
	}
	if want := [][]int64{{1, 2, 0}, {1, 0, 0}}; !reflect.DeepEqual(got, want) {
		t.Errorf("read %v, want %v", got, want)
	}
	counts := map[string]int64{"enqueued": 1, "last_enqueue": 5000}
	if err := s.Commit(ctx, "r0|1", []store.Commit{{Name: "older", Cursor: 5, Counts: counts}, {Name: "newer", Cursor: 5, Counts: counts}}); err != nil {
		t.Fatal(err)
	}
	values, _ := rdb.HMGet(ctx, s.Keys.Counters(), "older", "newer").Result()
	if want := store.FormatCounters(map[string]int64{"enqueued": 2, "manual": 2, "last_enqueue": 5000}); values[0] != want {
		t.Errorf("older value after a commit %q, want %q", values[0], want)
	}
	if want := store.FormatCounters(map[string]int64{"enqueued": 2, "last_enqueue": 5000}) + ",7,8"; values[1] != want {
		t.Errorf("newer value after a commit %q, want %q", values[1], want)
	}
}

// Every script that writes counters writes the packed value: a worker's
// step, a resume, a first sight and a manual run, read back by name.
func TestEveryWriterKeepsTheValueWhole(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	hold(t, s, ctx, "r0|1")
	if err := s.InitCursors(ctx, "r0|1", 1000, []string{"job"}); err != nil {
		t.Fatal(err)
	}
	step := func(count, last, also string, at int64) {
		t.Helper()
		err := s.RecordExecution(ctx, store.Execution{ID: fmt.Sprintf("cron:job:%d", at), Schedule: "job", Slot: time.Unix(1000, 0),
			Fields: []any{"outcome", "succeeded"}, Count: count, Last: last, AlsoLast: also, At: time.UnixMilli(at)})
		if err != nil {
			t.Fatal(err)
		}
	}
	step("succeeded", "last_success", "last_slot_success", 1_001_000)
	step("failed", "last_failure", "", 1_002_000)
	step("succeeded", "last_success", "", 1_003_000)
	if err := s.SetPause(ctx, "job", store.Pause{Reason: "r", At: 1_004_000}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ClearPause(ctx, "job", 1_005_000); err != nil {
		t.Fatal(err)
	}
	stats, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"first_seen": 1_000_000, "succeeded": 2, "failed": 1, "last_success": 1_003_000,
		"last_slot_success": 1_001_000, "last_failure": 1_002_000, "last_resume": 1_005_000}
	if !reflect.DeepEqual(stats["job"], want) {
		t.Errorf("counters %v, want %v", stats["job"], want)
	}
	raw, _ := redistest.Shared(t).HGet(ctx, s.Keys.Counters(), "job").Result()
	if n := strings.Count(raw, ",") + 1; n != len(store.CounterLayout) {
		t.Errorf("value %q holds %d counters, want %d", raw, n, len(store.CounterLayout))
	}
}

// What a read reports is what the writers wrote, for a value a commit made
// from nothing.
func TestACommitCountsFromNothing(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	hold(t, s, ctx, "r0|1")
	if err := s.Commit(ctx, "r0|1", []store.Commit{{Name: "new", Cursor: 5, Counts: map[string]int64{"missed": 2, "last_enqueue": 7}}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.StatFields(ctx, []string{"new"}, []string{"last_enqueue", "missed", "enqueued"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{7, 2, 0}; !slices.Equal(got[0], want) {
		t.Errorf("counters %v, want %v", got[0], want)
	}
}

// The demo runs on an in-process Redis whose Lua is another
// implementation: the counters' scripts must parse and form values there
// as Redis does.
func TestCountersOnTheDemosInProcessRedis(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	s := store.New(rdb, "demo", 3, time.Hour)
	if err := rdb.Set(ctx, s.Keys.Lease, "r0|1", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	counts := map[string]int64{"enqueued": 1, "last_enqueue": 1_796_248_800_123}
	for range 2 {
		if err := s.Commit(ctx, "r0|1", []store.Commit{{Name: "job", Cursor: 5, Counts: counts}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.RecordExecution(ctx, store.Execution{ID: "cron:job:5", Schedule: "job", Slot: time.Unix(5, 0),
		Fields: []any{"outcome", "succeeded"}, Count: "succeeded", Last: "last_success", At: time.UnixMilli(1_796_248_800_456)}); err != nil {
		t.Fatal(err)
	}
	rdb.HSet(ctx, s.Keys.Stats, "job:failed", 3)
	got, err := s.StatFields(ctx, []string{"job"}, []string{"enqueued", "last_enqueue", "succeeded", "last_success", "failed"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{2, 1_796_248_800_123, 1, 1_796_248_800_456, 3}; !slices.Equal(got[0], want) {
		t.Errorf("counters %v, want %v", got[0], want)
	}
}
