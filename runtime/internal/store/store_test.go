package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/belfry/belfry/internal/redistest"
	"github.com/belfry/belfry/runtime/internal/store"
	"github.com/redis/go-redis/v9"
)

func setup(t *testing.T) (*store.Store, context.Context) {
	t.Helper()
	rdb := redistest.Shared(t)
	s := store.New(rdb, redistest.Uniq("store"), 3, time.Hour)
	return s, context.Background()
}

// hold writes the lease key as a holder would, for fenced writes.
func hold(t *testing.T, s *store.Store, ctx context.Context, value string) {
	t.Helper()
	if err := redistest.Shared(t).Set(ctx, s.Keys.Lease, value, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
}

func TestCommitIsFencedByTheLeaseValue(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	hold(t, s, ctx, "r0|1")
	cursor := time.Date(2026, 11, 29, 3, 17, 0, 0, time.UTC).Unix()
	if err := s.Commit(ctx, "r0|1", []store.Commit{{Name: "nightly", Cursor: cursor}}); err != nil {
		t.Fatalf("holder's commit: %v", err)
	}
	hold(t, s, ctx, "r1|2") // another replica took over
	if err := s.Commit(ctx, "r0|1", []store.Commit{{Name: "nightly", Cursor: cursor - 86400}}); err != store.ErrNotLeader {
		t.Fatalf("zombie's commit: %v, want ErrNotLeader", err)
	}
	got, ok, err := s.Cursors(ctx, []string{"nightly", "never"})
	if err != nil {
		t.Fatal(err)
	}
	if !ok[0] || got[0] != cursor || ok[1] {
		t.Errorf("cursors %v %v after the zombie's write, want [%d _] [true false]", got, ok, cursor)
	}
	if err := s.InitCursors(ctx, "r0|1", cursor, []string{"new"}); err != store.ErrNotLeader {
		t.Errorf("zombie's init: %v, want ErrNotLeader", err)
	}
}

// More schedules than one chunk: every one is written and read back.
func TestCommitAndCursorsAcrossChunks(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	hold(t, s, ctx, "r0|1")
	n := 2*store.Chunk + 7
	names, commits := make([]string, n), make([]store.Commit, n)
	for i := range n {
		names[i] = "s" + time.Unix(int64(i), 0).UTC().Format("150405")
		commits[i] = store.Commit{Name: names[i], Cursor: int64(1000 + i)}
	}
	if err := s.InitCursors(ctx, "r0|1", 5, names[:store.Chunk+1]); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, "r0|1", commits); err != nil {
		t.Fatal(err)
	}
	got, ok, err := s.Cursors(ctx, names)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if !ok[i] || got[i] != int64(1000+i) {
			t.Fatalf("cursor of %s = %d (%v), want %d", names[i], got[i], ok[i], 1000+i)
		}
	}
	stats, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if stats[names[store.Chunk]]["first_seen"] != 5000 || stats[names[store.Chunk+1]]["first_seen"] != 0 {
		t.Errorf("first_seen recorded for the wrong schedules: %v %v", stats[names[store.Chunk]], stats[names[store.Chunk+1]])
	}
}

// A retry that runs after the leader trimmed its record from the history
// must not leave a record that no index points to.
func TestLateExecutionDoesNotResurrectATrimmedRecord(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t) // history limit 3
	hold(t, s, ctx, "r0|1")
	rdb := redistest.Shared(t)
	base := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	var recs []store.Rec
	for i := range 5 {
		slot := base.Add(time.Duration(i) * time.Second)
		recs = append(recs, store.Rec{ID: "cron:tick:" + slot.Format("150405"), Slot: slot.Unix(),
			Outcome: "enqueued", Score: slot.UnixMilli()})
	}
	if err := s.Commit(ctx, "r0|1", []store.Commit{{Name: "tick", Cursor: base.Unix() + 4, Recs: recs}}); err != nil {
		t.Fatal(err)
	}
	trimmed := recs[0]
	if n, _ := rdb.Exists(ctx, s.Keys.Occurrence(trimmed.ID)).Result(); n != 0 {
		t.Fatalf("the oldest record survived the trim")
	}
	for _, outcome := range []string{"running", "failed"} {
		err := s.RecordExecution(ctx, store.Execution{ID: trimmed.ID, Schedule: "tick", Slot: time.Unix(trimmed.Slot, 0),
			Fields: []any{"outcome", outcome}, Count: outcome, At: base})
		if err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := rdb.Exists(ctx, s.Keys.Occurrence(trimmed.ID)).Result(); n != 0 {
		t.Error("a late retry resurrected a trimmed record")
	}
	if n, _ := rdb.ZCard(ctx, s.Keys.History("tick")).Result(); n != 3 {
		t.Errorf("history holds %d entries, want the limit 3", n)
	}
	stats, _ := s.Stats(ctx)
	if stats["tick"]["failed"] != 1 {
		t.Errorf("the late attempt's failure was not counted: %v", stats["tick"])
	}
	// A worker that runs before the leader's commit records normally.
	fresh := base.Add(time.Minute)
	id := "cron:tick:fresh"
	if err := s.RecordExecution(ctx, store.Execution{ID: id, Schedule: "tick", Slot: fresh,
		Fields: []any{"outcome", "succeeded"}, At: fresh}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Records(ctx, []string{id})
	if err != nil || len(got) != 1 || got[0].Outcome != "succeeded" || got[0].Slot != fresh.Unix() {
		t.Errorf("an early execution's record: %+v %v", got, err)
	}
}

func TestForgetRemovesEveryTraceOfOneSchedule(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	hold(t, s, ctx, "r0|1")
	for _, name := range []string{"gone", "gone:sub", "kept"} {
		rec := store.Rec{ID: "cron:" + name + ":1", Slot: 1, Outcome: "enqueued", Score: 1000}
		if err := s.Commit(ctx, "r0|1", []store.Commit{{Name: name, Cursor: 1, LastID: rec.ID, Recs: []store.Rec{rec},
			Counts: map[string]int64{"enqueued": 1}}}); err != nil {
			t.Fatal(err)
		}
	}
	known, _ := s.Known(ctx)
	if len(known) != 3 {
		t.Fatalf("known %v, want 3 names", known)
	}
	if _, err := s.Forget(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	known, _ = s.Known(ctx)
	stats, _ := s.Stats(ctx)
	if len(known) != 2 || stats["gone"] != nil || stats["gone:sub"]["enqueued"] != 1 || stats["kept"]["enqueued"] != 1 {
		t.Errorf("after Forget(gone): known %v, stats %v; want gone:sub and kept untouched", known, stats)
	}
	rdb := redistest.Shared(t)
	if n, _ := rdb.Exists(ctx, s.Keys.History("gone"), s.Keys.Occurrence("cron:gone:1")).Result(); n != 0 {
		t.Errorf("%d of gone's keys remain", n)
	}
	if id, _ := s.LastID(ctx, "gone"); id != "" {
		t.Errorf("gone's last ID remains: %q", id)
	}
}

// onPrivateRedis is a store on a Redis of its own, whose command
// statistics only the test moves.
func onPrivateRedis(t *testing.T) (*store.Store, redis.UniversalClient, context.Context) {
	t.Helper()
	rdb := redistest.StartPrivate(t).Client(t)
	return store.New(rdb, redistest.Uniq("store"), 3, time.Hour), rdb, context.Background()
}

// wantNoCall fails the test if Redis ran any of commands (lower case)
// since its statistics were last reset: what did is named.
func wantNoCall(t *testing.T, rdb redis.UniversalClient, what string, commands ...string) {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range commands {
		if strings.Contains(info, "cmdstat_"+c+":") {
			t.Errorf("%s called %s, which reads a whole hash or keyspace:\n%s", what, strings.ToUpper(c), info)
		}
	}
}

// Forget touches the schedule's own state only: it deletes its counters by
// name, never looking through the stats hash that holds every schedule's
// (at 100,000 schedules an HKEYS of it held Redis far past the 5 ms any
// one call may block it for).
func TestForgetReadsNoOtherSchedulesState(t *testing.T) {
	t.Parallel()
	s, rdb, ctx := onPrivateRedis(t)
	if err := rdb.Set(ctx, s.Keys.Lease, "r0|1", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"gone", "kept"} {
		if err := s.Commit(ctx, "r0|1", []store.Commit{{Name: name, Cursor: 1,
			Counts: map[string]int64{"enqueued": 3, "last_enqueue": 1000}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Forget(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	wantNoCall(t, rdb, "Forget", "hkeys", "hgetall", "hvals", "hscan", "keys", "scan")
	stats, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if stats["gone"] != nil || stats["kept"]["enqueued"] != 3 || stats["kept"]["last_enqueue"] != 1000 {
		t.Errorf("stats after Forget(gone): %v; want kept's alone", stats)
	}
}

// The reads of every schedule's state go in HSCAN steps: one HGETALL or
// HKEYS of the old layout's counters hash, a dozen fields a schedule, held
// Redis far past the 5 ms budget at 100,000 schedules. The counters
// are written here in that layout, so the fold of it into the new one
// (legacyFoldScript) goes in steps too.
func TestReadsOfEverySchedulesStateGoInSteps(t *testing.T) {
	t.Parallel()
	s, rdb, ctx := onPrivateRedis(t)
	const schedules = 1500 // more fields than one step reads
	p := rdb.Pipeline()
	for i := range schedules {
		name := fmt.Sprintf("job:%d", i) // a name may hold the separator
		p.HSet(ctx, s.Keys.Cursors, name, 1)
		p.HSet(ctx, s.Keys.Stats, name+":enqueued", i, name+":last_enqueue", 1000+i)
	}
	if _, err := p.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	stats, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	known, err := s.Known(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantNoCall(t, rdb, "a read of every schedule", "hgetall", "hkeys", "hvals")
	if len(stats) != schedules || stats["job:7"]["enqueued"] != 7 || stats["job:7"]["last_enqueue"] != 1007 {
		t.Errorf("Stats: %d schedules, job:7 %v; want %d, enqueued 7, last_enqueue 1007", len(stats), stats["job:7"], schedules)
	}
	if len(known) != schedules {
		t.Errorf("Known: %d names, want %d", len(known), schedules)
	}
}

// A commit never moves a cursor back: the enqueue raised it to the slot it
// put in asynq, and a commit after a failed enqueue whose reply was lost
// (it ran) carries the cursor from before that slot.
func TestACommitNeverLowersACursor(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	hold(t, s, ctx, "r0|1")
	if err := redistest.Shared(t).HSet(ctx, s.Keys.Cursors, "tick", 1010).Err(); err != nil { // the enqueue's mark
		t.Fatal(err)
	}
	if err := s.Commit(ctx, "r0|1", []store.Commit{{Name: "tick", Cursor: 1009}}); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := s.Cursors(ctx, []string{"tick"}); got[0] != 1010 {
		t.Errorf("cursor %d after a commit of an older one, want 1010 kept", got[0])
	}
	if err := s.Commit(ctx, "r0|1", []store.Commit{{Name: "tick", Cursor: 1011}}); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := s.Cursors(ctx, []string{"tick"}); got[0] != 1011 {
		t.Errorf("cursor %d, want 1011", got[0])
	}
}

// The leader commits a batch in the background while it goes on
// enqueueing, so an earlier batch's commit can land after a later slot's
// enqueue raised the cursor and the last ID (its mark) and after a later
// commit: it takes neither the last ID nor the last enqueue time back, or
// overlap=skip would ask whether the older occurrence still runs.
func TestALateCommitKeepsTheNewerLastIDAndTimes(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	hold(t, s, ctx, "r0|1")
	rdb := redistest.Shared(t)
	// The mark of slot 1010's enqueue.
	if err := rdb.HSet(ctx, s.Keys.Cursors, "tick", 1010).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HSet(ctx, s.Keys.LastID, "tick", "cron:tick:1010").Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, "r0|1", []store.Commit{{Name: "tick", Cursor: 1010, LastID: "cron:tick:1010",
		Counts: map[string]int64{"last_enqueue": 1010500}}}); err != nil {
		t.Fatal(err)
	}
	// Slot 1009's commit, late.
	if err := s.Commit(ctx, "r0|1", []store.Commit{{Name: "tick", Cursor: 1009, LastID: "cron:tick:1009",
		Counts: map[string]int64{"last_enqueue": 1009500}}}); err != nil {
		t.Fatal(err)
	}
	if id, err := s.LastID(ctx, "tick"); err != nil || id != "cron:tick:1010" {
		t.Errorf("last ID %q (%v) after a late commit of an older one, want cron:tick:1010 kept", id, err)
	}
	stats, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := stats["tick"]["last_enqueue"]; got != 1010500 {
		t.Errorf("last_enqueue %d after a late commit of an older one, want 1010500 kept", got)
	}
	if err := s.Commit(ctx, "r0|1", []store.Commit{{Name: "tick", Cursor: 1011, LastID: "cron:tick:1011"}}); err != nil {
		t.Fatal(err)
	}
	if id, _ := s.LastID(ctx, "tick"); id != "cron:tick:1011" {
		t.Errorf("last ID %q, want cron:tick:1011", id)
	}
}

// A schedule with its own, smaller limit is trimmed to it by the commit and
// by a worker's record alike; the others keep HistoryLimit.
func TestAScheduleOwnHistoryLimit(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t) // history limit 3
	s.Limits = map[string]int{"frequent": 1}
	hold(t, s, ctx, "r0|1")
	rdb := redistest.Shared(t)
	base := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	var commits []store.Commit
	for _, name := range []string{"frequent", "other"} {
		c := store.Commit{Name: name, Cursor: base.Unix() + 4}
		for i := range 4 {
			slot := base.Add(time.Duration(i) * time.Second)
			c.Recs = append(c.Recs, store.Rec{ID: "cron:" + name + ":" + slot.Format("150405"), Slot: slot.Unix(),
				Outcome: "enqueued", Score: slot.UnixMilli()})
		}
		commits = append(commits, c)
	}
	if err := s.Commit(ctx, "r0|1", commits); err != nil {
		t.Fatal(err)
	}
	if n := rdb.ZCard(ctx, s.Keys.History("frequent")).Val(); n != 1 {
		t.Errorf("the frequent schedule keeps %d records, want its own limit 1", n)
	}
	if n := rdb.ZCard(ctx, s.Keys.History("other")).Val(); n != 3 {
		t.Errorf("the other schedule keeps %d records, want HistoryLimit 3", n)
	}
	slot := base.Add(time.Minute)
	if err := s.RecordExecution(ctx, store.Execution{ID: "cron:frequent:late", Schedule: "frequent", Slot: slot,
		Fields: []any{"outcome", "succeeded"}, At: slot}); err != nil {
		t.Fatal(err)
	}
	if ids := rdb.ZRange(ctx, s.Keys.History("frequent"), 0, -1).Val(); len(ids) != 1 || ids[0] != "cron:frequent:late" {
		t.Errorf("after a worker's record the frequent schedule's history is %v, want only the newest", ids)
	}
	if n := rdb.Exists(ctx, s.Keys.Occurrence(commits[0].Recs[3].ID)).Val(); n != 0 {
		t.Error("the record trimmed by the worker's write is still in Redis")
	}
}

// Records reads every field of a record into its place and leaves out an ID
// whose record is gone.
func TestRecordsReadEveryFieldAndSkipTheGone(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	want := store.Record{ID: "cron:full:1", Schedule: "full", Outcome: "failed", Error: "boom", Replica: "r1",
		Slot: 1700000000, Manual: true, EnqueuedAt: 1700000000001, StartedAt: 1700000000002,
		FinishedAt: 1700000000003, DurationMS: 4, Attempt: 5, MaxRetry: 6, Actor: "ops", Member: "tenant-7"}
	err := redistest.Shared(t).HSet(ctx, s.Keys.Occurrence(want.ID), "id", want.ID, "schedule", want.Schedule,
		"outcome", want.Outcome, "error", want.Error, "replica", want.Replica, "slot", want.Slot, "manual", "1",
		"enqueued_at", want.EnqueuedAt, "started_at", want.StartedAt, "finished_at", want.FinishedAt,
		"duration_ms", want.DurationMS, "attempt", want.Attempt, "max_retry", want.MaxRetry,
		"actor", want.Actor, "member", want.Member).Err()
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Records(ctx, []string{"cron:full:gone", want.ID})
	if err != nil || len(got) != 1 || got[0] != want {
		t.Errorf("Records = %+v, %v; want only %+v", got, err, want)
	}
}
