package store_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/belfry/belfry/internal/redistest"
	"github.com/belfry/belfry/runtime/internal/store"
	"github.com/redis/go-redis/v9"
)

// The execution state follows the worker's steps, and Problems reads all
// of it however many schedules it names: in one round trip while small, in
// HSCAN steps past that.
func TestExecutionStateAndProblems(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	const n = 2500 // several HSCAN steps
	for i := range n {
		if err := s.NoteExecution(ctx, fmt.Sprintf("job-%04d", i), "running", 1); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now().UnixMilli()
	for _, step := range []struct{ name, outcome string }{
		{"job-0001", "retrying"}, {"job-0002", "failed"}, {"job-0003", "failed"}, {"job-0003", "succeeded"},
		{"job-0004", "failed"}, {"job-0004", "running"},
	} {
		if err := s.NoteExecution(ctx, step.name, step.outcome, now); err != nil {
			t.Fatal(err)
		}
	}
	p, err := s.Problems(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Active) != n-2 || p.Active["job-0001"] != "retrying" || p.Active["job-0004"] != "running" {
		t.Errorf("%d active, job-0001 %q, job-0004 %q; want %d, retrying, running", len(p.Active), p.Active["job-0001"], p.Active["job-0004"], n-2)
	}
	if _, ok := p.Active["job-0003"]; ok {
		t.Error("a success left job-0003 active")
	}
	if len(p.Failing) != 2 || p.Failing["job-0002"] == "" || p.Failing["job-0004"] == "" {
		t.Errorf("failing %v, want job-0002 and job-0004: a failure stays until a success", p.Failing)
	}
	if n, err := s.ForgetExecution(ctx, "job-0004"); err != nil || n != 2 {
		t.Errorf("forget: %d fields, %v; want 2", n, err)
	}
}

// StatFields reads many names over several HMGETs and connections, each
// name's counters landing in its own row, whatever the number of fields.
func TestStatFieldsPutsEachNamesCountersInItsRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Shared(t)
	s := store.New(rdb, redistest.Uniq("statfields"), 10, time.Hour)
	const n = 2*store.Chunk*4 + 7 // more than a chunk per reader, and a ragged end
	names := make([]string, n)
	values := map[string]any{}
	for i := range names {
		names[i] = fmt.Sprintf("s%d", i)
		c := map[string]int64{"missed": int64(i), "last_failure": 3 * int64(i)}
		if i%2 == 0 {
			c["enqueued"] = -int64(i) // every other one unset
		}
		values[names[i]] = store.FormatCounters(c)
	}
	if err := rdb.HSet(ctx, s.Keys.Counters(), values).Err(); err != nil {
		t.Fatal(err)
	}
	for _, fields := range [][]string{{"missed"}, {"missed", "enqueued", "last_failure"}} {
		got, err := s.StatFields(ctx, names, fields)
		if err != nil {
			t.Fatal(err)
		}
		for i, row := range got {
			want := []int64{int64(i), 0, int64(3 * i)}
			if i%2 == 0 {
				want[1] = int64(-i)
			}
			if len(fields) == 1 {
				want = want[:1]
			}
			if !slices.Equal(row, want) {
				t.Fatalf("%d fields: row %d = %v, want %v", len(fields), i, row, want)
			}
		}
	}
}

// BenchmarkScheduleData is the read of the unpaged schedule list, per
// schedule: its thirteen counters, its newest record, its pause and
// execution state. Its allocations are what the list's service CPU grows
// with; go test -bench ScheduleData -benchmem ./runtime/internal/store.
func BenchmarkScheduleData(b *testing.B) {
	ctx := context.Background()
	rdb := redistest.Shared(b)
	s := store.New(rdb, redistest.Uniq("scheduledata"), 50, time.Hour)
	const n = 5000
	fields := []string{"enqueued", "manual", "missed", "skipped", "paused", "succeeded", "failed",
		"last_enqueue", "last_success", "last_failure", "first_seen", "last_resume", "last_slot_success"}
	names := make([]string, n)
	pipe := rdb.Pipeline()
	for i := range names {
		names[i] = fmt.Sprintf("job-%06d", i)
		id := "cron:" + names[i] + ":1796248800"
		counters := map[string]int64{}
		for j, f := range fields {
			counters[f] = 1796248800000 + int64(j)
		}
		pipe.HSet(ctx, s.Keys.Counters(), names[i], store.FormatCounters(counters))
		pipe.ZAdd(ctx, s.Keys.History(names[i]), redis.Z{Score: 1796248800000, Member: id})
		pipe.HSet(ctx, s.Keys.Occurrence(id), "id", id, "schedule", names[i], "slot", 1796248800, "manual", "0",
			"enqueued_at", 1796248800001, "outcome", "succeeded", "started_at", 1796248800002,
			"finished_at", 1796248800003, "duration_ms", 1, "attempt", 0, "max_retry", 3, "replica", "r1", "error", "")
	}
	if _, err := pipe.Exec(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		rdb.Del(ctx, s.Keys.Counters())
		for _, name := range names {
			rdb.Del(ctx, s.Keys.History(name), s.Keys.Occurrence("cron:"+name+":1796248800"))
		}
	})
	b.ReportAllocs()
	for b.Loop() {
		data, err := s.ScheduleData(ctx, names, 1, fields, nil)
		if err != nil || len(data) != n || len(data[n-1].Recent) != 1 || data[n-1].Stats[12] != 1796248800012 {
			b.Fatalf("ScheduleData: %v", err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/schedule")
}
