package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/engine"
	"github.com/belfry/belfry/runtime/postgres"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
)

// migratedDB is a fresh database with belfry's and River's schema.
func migratedDB(t *testing.T) *pgxpool.Pool {
	t.Helper()
	db := freshDB(t)
	if _, err := postgres.Migrate(context.Background(), db, postgres.MigrateOptions{River: true}); err != nil {
		t.Fatal(err)
	}
	return db
}

// newEngine is an engine of namespace "ns" on db, named replica.
func newEngine(t *testing.T, db *pgxpool.Pool, replica string) *postgres.Engine {
	t.Helper()
	return configured(t, postgres.Config{Pool: db}, engine.Config{Namespace: "ns", Replica: replica, LeaseTTL: 2 * time.Second})
}

// configured is the engine New builds of own, configured with the
// runtime's settings rt as core.New configures it (a quiet logger unless
// rt names one), for tests that use an engine without a runtime.
func configured(t testing.TB, own postgres.Config, rt engine.Config) *postgres.Engine {
	t.Helper()
	pending, err := postgres.New(own)
	if err != nil {
		t.Fatal(err)
	}
	if rt.Logger == nil {
		rt.Logger = quietLogger()
	}
	e, err := pending.Configure(rt)
	if err != nil {
		t.Fatal(err)
	}
	return e.(*postgres.Engine)
}

// run takes part in e's election until stop or the test's end; stop
// ends it and releases the lease.
func run(t *testing.T, e *postgres.Engine) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			<-done
			e.Release(context.Background())
		})
	}
	t.Cleanup(stop)
	return stop
}

// lead runs e's election and waits for it to lead.
func lead(t *testing.T, e *postgres.Engine) (term string, stop func()) {
	t.Helper()
	stop = run(t, e)
	waitUntil(t, 10*time.Second, "the engine to lead", leading(e))
	term, _ = e.Current()
	return term, stop
}

// slotItems are the enqueues of schedule's scheduled occurrences of
// slots, each raising its cursor.
func slotItems(schedule string, slots ...time.Time) []engine.Enqueue {
	var items []engine.Enqueue
	for _, slot := range slots {
		occ := registry.Occurrence{Schedule: schedule, Slot: slot.UTC(), Zone: "UTC",
			ID: registry.Scope{Namespace: "ns", Schedule: schedule}.ID(slot)}
		items = append(items, engine.Enqueue{
			Task:   engine.Task{Type: schedule, Payload: registry.EncodeOccurrence(occ), ID: occ.ID, Queue: "default", MaxRetry: 2},
			Cursor: engine.CursorMark{Schedule: schedule, Slot: slot.Unix()},
		})
	}
	return items
}

func mustInt(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("term %q: %v", s, err)
	}
	return n
}

func count(t *testing.T, db *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// An enqueue under a term that has ended inserts nothing, however late it
// comes: refused with ErrNotLeader, its fence rejected, no slot row, no
// River job, no cursor. The live term's enqueue inserts each slot once,
// with its River job (kind the schedule's name, metadata belfry_key) and
// its cursor; sent again it inserts nothing. Terms only rise.
func TestAnEndedTermsEnqueueIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := migratedDB(t)
	a, b := newEngine(t, db, "a"), newEngine(t, db, "b")
	termA, stopA := lead(t, a)
	stopA()
	termB, _ := lead(t, b)
	if a, b := mustInt(t, termA), mustInt(t, termB); b <= a {
		t.Fatalf("terms %s then %s; want a rising term", termA, termB)
	}
	base := time.Now().Truncate(time.Second)
	items := slotItems("tick", base, base.Add(time.Second), base.Add(2*time.Second))

	stale := &engine.Fence{Term: termA}
	for i, r := range a.EnqueueAll(ctx, stale, items) {
		if !errors.Is(r.Err, engine.ErrNotLeader) || r.Inserted {
			t.Errorf("item %d under the ended term: %+v, want ErrNotLeader", i, r)
		}
	}
	if !stale.Rejected() {
		t.Error("the ended term's fence was not rejected")
	}
	if n := count(t, db, "SELECT count(*) FROM river_job"); n != 0 {
		t.Errorf("the ended term inserted %d River jobs", n)
	}
	if n := count(t, db, "SELECT count(*) FROM belfry_slot"); n != 0 {
		t.Errorf("the ended term inserted %d slot rows", n)
	}
	if _, ok, err := a.Cursors(ctx, []string{"tick"}); err != nil || ok[0] {
		t.Errorf("the ended term raised the cursor (%v)", err)
	}

	live := &engine.Fence{Term: termB}
	for i, r := range b.EnqueueAll(ctx, live, items) {
		if r.Err != nil || !r.Inserted {
			t.Errorf("item %d under the live term: %+v, want inserted", i, r)
		}
	}
	for i, r := range b.EnqueueAll(ctx, live, items) {
		if r.Err != nil || r.Inserted {
			t.Errorf("item %d sent again: %+v, want a conflict (not inserted, no error)", i, r)
		}
	}
	if live.Rejected() {
		t.Error("the live term's fence was rejected")
	}
	if n := count(t, db, `SELECT count(*) FROM river_job WHERE kind = 'tick' AND queue = 'default' AND max_attempts = 3
		AND metadata->>'belfry_key' LIKE 'cron:ns/tick:%'`); n != len(items) {
		t.Errorf("%d River jobs of kind tick with belfry_key, want %d", n, len(items))
	}
	if n := count(t, db, "SELECT count(*) FROM belfry_slot WHERE job_id IS NOT NULL"); n != len(items) {
		t.Errorf("%d slot rows with their job, want %d", n, len(items))
	}
	cursors, ok, err := b.Cursors(ctx, []string{"tick"})
	if err != nil || !ok[0] || cursors[0] != base.Add(2*time.Second).Unix() {
		t.Errorf("cursor = %d (%v, %v), want the last slot %d", cursors[0], ok[0], err, base.Add(2*time.Second).Unix())
	}
	if running, err := b.TaskRunning(ctx, "default", items[0].Task.ID); err != nil || !running {
		t.Errorf("TaskRunning of a job no worker took = %v, %v; want true", running, err)
	}
}

// Two planners that both believe they lead (no fence between them) and
// send the same slots at once insert each slot once.
func TestTwoPlannersInsertEachSlotOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := migratedDB(t)
	planners := []*postgres.Engine{newEngine(t, db, "a"), newEngine(t, db, "b")}
	base := time.Now().Truncate(time.Second)
	var slots []time.Time
	for i := range 200 {
		slots = append(slots, base.Add(time.Duration(i)*time.Second))
	}
	items := slotItems("tick", slots...)
	inserted := make(map[string]int)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			e := planners[g%2]
			// Each sends the slots in chunks of its own size.
			for start, size := 0, 7+g*5; start < len(items); start += size {
				part := items[start:min(start+size, len(items))]
				for i, r := range e.EnqueueAll(ctx, nil, part) {
					if r.Err != nil {
						t.Errorf("planner %d: %v", g, r.Err)
					}
					if r.Inserted {
						mu.Lock()
						inserted[part[i].Task.ID]++
						mu.Unlock()
					}
				}
			}
		})
	}
	wg.Wait()
	if len(inserted) != len(items) {
		t.Errorf("%d of %d slots inserted", len(inserted), len(items))
	}
	for id, n := range inserted {
		if n != 1 {
			t.Errorf("%s inserted %d times", id, n)
		}
	}
	if n := count(t, db, "SELECT count(*) FROM river_job"); n != len(items) {
		t.Errorf("%d River jobs for %d slots", n, len(items))
	}
}

// A slot whose row another transaction inserts while an enqueue prepares
// its job (the enqueue found no committed row, then waits on the other's
// insert) goes to the other: the enqueue reports it not inserted, and
// commits no job of it, only the other's row.
func TestASlotTakenWhileItsJobIsPreparedCommitsNoJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := migratedDB(t)
	e := newEngine(t, db, "a")
	slot := time.Now().Truncate(time.Second)
	items := slotItems("tick", slot)
	other, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback(ctx)
	if _, err := other.Exec(ctx, `INSERT INTO belfry_slot (namespace, schedule, member, slot, occurrence_id) VALUES ('ns', 'tick', '', $1, $2)`,
		slot, items[0].Task.ID); err != nil {
		t.Fatal(err)
	}
	done := make(chan engine.Result, 1)
	go func() { done <- e.EnqueueAll(ctx, nil, items)[0] }()
	waitUntil(t, 10*time.Second, "the enqueue to wait on the other's row", waitingOnLock(t, db))
	if n := count(t, db, `SELECT count(*) FROM river_job`); n != 0 {
		t.Fatalf("%d River jobs visible before the enqueue ended; want none", n)
	}
	if err := other.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.Err != nil || r.Inserted {
		t.Errorf("enqueue of a slot the other transaction took: %+v; want not inserted, no error", r)
	}
	if n := count(t, db, `SELECT count(*) FROM river_job`); n != 0 {
		t.Errorf("%d River jobs committed for a slot the enqueue did not take; want none", n)
	}
	if n := count(t, db, `SELECT count(*) FROM belfry_slot WHERE job_id IS NULL`); n != 1 {
		t.Errorf("%d slot rows as the other transaction wrote it; want 1", n)
	}
}

// The retention rule: a slot row outlives every window in which its slot
// can be attempted. PruneSlots deletes rows older than the window but
// never a schedule's newest (misfire=latest attempts it until the next
// slot), and a slot whose row stays is refused when enqueued again.
func TestSlotRowsOutliveTheirWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := migratedDB(t)
	e := newEngine(t, db, "a")
	now := time.Now().Truncate(time.Second)
	old := slotItems("tick", now.Add(-3*time.Hour), now.Add(-2*time.Hour))
	recent := slotItems("tick", now.Add(-10*time.Second))
	yearly := slotItems("yearly", now.Add(-3*time.Hour))
	all := append(append(append([]engine.Enqueue{}, old...), recent...), yearly...)
	for _, r := range e.EnqueueAll(ctx, nil, all) {
		if r.Err != nil || !r.Inserted {
			t.Fatalf("enqueue: %+v", r)
		}
	}
	n, err := e.PruneSlots(ctx, time.Hour)
	if err != nil || n != int64(len(old)) {
		t.Errorf("PruneSlots(1h) deleted %d (%v), want the %d old rows that a newer slot follows", n, err, len(old))
	}
	for _, r := range e.EnqueueAll(ctx, nil, append(recent, yearly...)) {
		if r.Err != nil || r.Inserted {
			t.Errorf("a slot whose row was kept enqueued again: %+v, want a conflict", r)
		}
	}
	if left := count(t, db, "SELECT count(*) FROM belfry_slot"); left != 2 {
		t.Errorf("%d slot rows left, want the recent one and the yearly schedule's newest", left)
	}
}

// History keeps a schedule's newest records up to its limit, newest
// first, and a worker's step of an older attempt does not overwrite a
// newer one's.
func TestHistoryKeepsTheNewestUpToItsLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := migratedDB(t)
	e := configured(t, postgres.Config{Pool: db}, engine.Config{Namespace: "ns", Replica: "a", HistoryLimit: 5})
	for i := range 8 {
		rec := engine.Rec{ID: fmt.Sprintf("cron:ns/tick:%d", 1000+i), Slot: int64(1000 + i), At: int64(1000+i) * 1000,
			Outcome: "enqueued", Score: int64(1000+i) * 1000}
		if err := e.RecordManual(ctx, engine.Commit{Name: "tick", Recs: []engine.Rec{rec}, Counts: map[string]int64{"enqueued": 1}}); err != nil {
			t.Fatal(err)
		}
	}
	ids, err := e.History(ctx, "tick", 100)
	if err != nil || len(ids) != 5 || ids[0] != "cron:ns/tick:1007" || ids[4] != "cron:ns/tick:1003" {
		t.Errorf("History = %v, %v; want the 5 newest, newest first", ids, err)
	}
	step := func(attempt int, outcome string) engine.Execution {
		return engine.Execution{ID: "cron:ns/tick:1007", Schedule: "tick", Slot: time.Unix(1007, 0), At: time.Now(), Attempt: attempt,
			Fields: []any{"outcome", outcome, "error", "attempt " + outcome}}
	}
	if err := e.RecordExecution(ctx, step(1, "succeeded")); err != nil {
		t.Fatal(err)
	}
	if err := e.RecordExecution(ctx, step(0, "failed")); err != nil {
		t.Fatal(err)
	}
	recs, err := e.Records(ctx, ids[:1])
	if err != nil || len(recs) != 1 || recs[0].Outcome != "succeeded" || recs[0].Attempt != 1 || recs[0].EnqueuedAt != 1007000 {
		t.Errorf("record after attempts 1 then 0 = %+v, %v; want attempt 1's success, its enqueue time kept", recs, err)
	}
	stats, err := e.Stats(ctx)
	if err != nil || stats["tick"]["enqueued"] != 8 {
		t.Errorf("Stats = %v, %v; want 8 enqueued", stats, err)
	}
}

// A spike of 10,000 slots due at once, sent in one call as a leader sends
// a dispatch, goes in whole: each slot once, with its job and cursor.
func TestASpikeOfTenThousandSlotsGoesInWhole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := migratedDB(t)
	e := newEngine(t, db, "a")
	term, _ := lead(t, e)
	slot := time.Now().Truncate(time.Second)
	var items []engine.Enqueue
	for i := range 10000 {
		items = append(items, slotItems(fmt.Sprintf("job-%05d", i), slot)...)
	}
	start := time.Now()
	results := e.EnqueueAll(ctx, &engine.Fence{Term: term}, items)
	took := time.Since(start)
	t.Logf("10,000 slots enqueued in one call in %s", took.Round(time.Millisecond))
	for i, r := range results {
		if r.Err != nil || !r.Inserted {
			t.Fatalf("item %d: %+v", i, r)
		}
	}
	if n := count(t, db, "SELECT count(*) FROM river_job"); n != len(items) {
		t.Errorf("%d River jobs for %d slots", n, len(items))
	}
	if n := count(t, db, "SELECT count(*) FROM belfry_cursor WHERE slot = to_timestamp($1)", slot.Unix()); n != len(items) {
		t.Errorf("%d cursors raised for %d schedules", n, len(items))
	}
}

// Given the service's River client, the engine inserts its jobs through
// it, so that the client's hooks see them.
func TestJobsGoThroughTheServicesRiverClient(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := migratedDB(t)
	var seen []string
	var mu sync.Mutex
	client, err := river.NewClient(riverpgxv5.New(db), &river.Config{Hooks: []rivertype.Hook{
		river.HookInsertBeginFunc(func(_ context.Context, p *rivertype.JobInsertParams) error {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, p.Kind)
			return nil
		})}})
	if err != nil {
		t.Fatal(err)
	}
	e := configured(t, postgres.Config{Pool: db, River: client}, engine.Config{Namespace: "ns", Replica: "a"})
	if r := e.EnqueueAll(ctx, nil, slotItems("tick", time.Now().Truncate(time.Second))); r[0].Err != nil || !r[0].Inserted {
		t.Fatalf("enqueue: %+v", r[0])
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 || seen[0] != "tick" {
		t.Errorf("the client's insert hook saw %v, want the tick job", seen)
	}
}

// An engine on a database that was never migrated says so, naming the
// command to run, rather than reporting the database unreachable.
func TestAMissingSchemaNamesTheCommand(t *testing.T) {
	t.Parallel()
	db := freshDB(t)
	e := newEngine(t, db, "a")
	reported := make(chan error, 16)
	e.Watch(func(err error) {
		select {
		case reported <- err:
		default:
		}
	})
	run(t, e)
	select {
	case err := <-reported:
		if !errors.Is(err, postgres.ErrSchemaOutdated) || !strings.Contains(err.Error(), "belfry migrate --postgres") {
			t.Errorf("the election's call reported %v; want ErrSchemaOutdated naming belfry migrate", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the election reported no call")
	}
}

// A read of several schedules answers each name asked, also one asked
// twice: its counters, newest records, pause and execution state.
func TestScheduleDataAnswersEveryNameAsked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := migratedDB(t)
	e := newEngine(t, db, "a")
	rec := engine.Rec{ID: "cron:ns/tick:1000", Slot: 1000, At: 1000000, Outcome: "enqueued", Score: 1000000}
	if err := e.RecordManual(ctx, engine.Commit{Name: "tick", Recs: []engine.Rec{rec}, Counts: map[string]int64{"enqueued": 2}}); err != nil {
		t.Fatal(err)
	}
	if err := e.SetPause(ctx, "tick", engine.Pause{Reason: "r", Actor: "ops", At: 5}); err != nil {
		t.Fatal(err)
	}
	if err := e.NoteExecution(ctx, "tick", "failed", 7000); err != nil {
		t.Fatal(err)
	}
	names := []string{"tick", "other", "tick"}
	data, err := e.ScheduleData(ctx, names, 5, []string{"enqueued"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 2} {
		d := data[i]
		if len(d.Recent) != 1 || d.Stats[0] != 2 || d.Pause == nil || d.Pause.Reason != "r" || d.FailingSince != 7000 {
			t.Errorf("tick at %d: %+v; want its record, 2 enqueued, its pause and failing since 7000", i, d)
		}
	}
	if d := data[1]; len(d.Recent) != 0 || d.Stats[0] != 0 || d.Pause != nil || d.FailingSince != 0 {
		t.Errorf("other: %+v; want nothing", d)
	}
	problems, err := e.Problems(ctx)
	if err != nil || problems.Failing["tick"] != "7000" || problems.Paused["tick"] == "" {
		t.Errorf("Problems = %+v, %v; want tick failing and paused", problems, err)
	}
}
