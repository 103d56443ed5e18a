package admin

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
)

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// A Europe/London time is printed with its offset, +00:00 in winter, never
// the Z that Go's RFC 3339 writes for every zero offset.
func TestInstantOf(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 3, 1, 0, 0, time.UTC)
	for _, tt := range []struct {
		name          string
		t             time.Time
		zone          string
		local, abbrev string
		utc, relative string
		precise       string
	}{
		{"London in winter", time.Date(2026, 12, 1, 3, 17, 0, 0, time.UTC), "Europe/London",
			"2026-12-01T03:17:00+00:00", "GMT", "2026-12-01T03:17:00Z", "in 16 min", "2026-12-01T03:17:00.000+00:00"},
		{"London in summer", time.Date(2026, 7, 1, 2, 17, 0, 0, time.UTC), "Europe/London",
			"2026-07-01T03:17:00+01:00", "BST", "2026-07-01T02:17:00Z", "153 days ago", "2026-07-01T03:17:00.000+01:00"},
		{"UTC", time.Date(2026, 12, 1, 2, 58, 0, 250e6, time.UTC), "UTC",
			"2026-12-01T02:58:00Z", "", "", "3 min ago", "2026-12-01T02:58:00.250Z"},
		{"numeric abbreviation", time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC), "America/Sao_Paulo",
			"2026-12-01T00:00:00-03:00", "", "2026-12-01T03:00:00Z", "1 min ago", "2026-12-01T00:00:00.000-03:00"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := instantOf(tt.t, mustZone(t, tt.zone), now)
			want := instant{Local: tt.local, Abbrev: tt.abbrev, UTC: tt.utc, Relative: tt.relative, Precise: tt.precise}
			if got != want {
				t.Errorf("instantOf = %+v\nwant      %+v", got, want)
			}
		})
	}
	if got := instantOf(time.Time{}, time.UTC, now); !got.Zero {
		t.Errorf("the zero time: %+v, want Zero", got)
	}
}

func TestRelative(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{
		{0, "just now"},
		{-400 * time.Millisecond, "just now"},
		{400 * time.Millisecond, "now"},
		{42 * time.Second, "in 42 s"},
		{-42 * time.Second, "42 s ago"},
		{16*time.Minute + 59*time.Second, "in 16 min"},
		{-3 * time.Minute, "3 min ago"},
		{-time.Hour, "1 h ago"},
		{2*time.Hour + 5*time.Minute, "in 2 h 5 min"},
		{15*time.Hour + 5*time.Minute, "in 15 h"},
		{-47 * time.Hour, "47 h ago"},
		{-49 * time.Hour, "2 days ago"},
		{24 * 9 * time.Hour, "in 9 days"},
	} {
		if got := relative(now.Add(tt.d), now); got != tt.want {
			t.Errorf("relative(now%+v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}

func TestHistoryRowOf(t *testing.T) {
	t.Parallel()
	reg := registry.MustNew(registry.Schedule{Name: "prune", Expr: "17 3 * * *", Zone: "Europe/London",
		Handler: func(context.Context, registry.Occurrence) error { return nil }})
	s, _ := reg.Lookup("prune")
	slot := time.Date(2026, 11, 30, 3, 17, 0, 0, time.UTC)
	now := slot.Add(6 * time.Hour)
	for _, tt := range []struct {
		name                    string
		rec                     runtime.Record
		outcome, attempts, kind string
		rerunnable, prominent   bool
	}{
		{"succeeded", runtime.Record{ID: "cron:prune:1764472620", Outcome: runtime.OutcomeSucceeded}, "succeeded", "", "", true, false},
		{"retrying", runtime.Record{ID: "cron:prune:1764472620", Outcome: runtime.OutcomeRetrying, Attempt: 0, MaxRetry: 3}, "retrying 1/3", "", "", true, false},
		{"retrying again", runtime.Record{ID: "cron:prune:1764472620", Outcome: runtime.OutcomeRetrying, Attempt: 2, MaxRetry: 3}, "retrying 3/3", "", "", true, false},
		{"failed at once", runtime.Record{ID: "cron:prune:1764472620", Outcome: runtime.OutcomeFailed}, "failed", "", "", true, true},
		{"failed after one retry", runtime.Record{ID: "cron:prune:1764472620", Outcome: runtime.OutcomeFailed, Attempt: 1, MaxRetry: 1}, "failed", "after 1 retry", "", true, true},
		{"failed after retries", runtime.Record{ID: "cron:prune:1764472620", Outcome: runtime.OutcomeFailed, Attempt: 2, MaxRetry: 2}, "failed", "after 2 retries", "", true, true},
		{"missed", runtime.Record{ID: "cron:prune:1764472620", Outcome: runtime.OutcomeMissed}, "missed", "", "", true, true},
		{"skipped", runtime.Record{ID: "cron:prune:1764472620", Outcome: runtime.OutcomeSkipped}, "skipped", "", "", true, true},
		{"paused", runtime.Record{ID: "cron:prune:1764472620", Outcome: runtime.OutcomePaused}, "paused", "", "", true, true},
		{"lost to a failover", runtime.Record{ID: "cron:prune:1764472620", Outcome: runtime.OutcomeLost}, "lost", "", "", true, true},
		{"run now", runtime.Record{ID: "cron:prune:manual:abc", Manual: true, Outcome: runtime.OutcomeFailed}, "failed", "", "run now", false, false},
		{"re-run", runtime.Record{ID: "cron:prune:rerun:1764472620:abc", Manual: true, Outcome: runtime.OutcomeSucceeded}, "succeeded", "", "re-run", true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.rec.Schedule, tt.rec.Slot = "prune", slot
			row := historyRowOf(tt.rec, s, now)
			if row.Outcome != tt.outcome || row.Attempts != tt.attempts || row.Kind != tt.kind ||
				row.Rerunnable != tt.rerunnable || row.Prominent != tt.prominent {
				t.Errorf("got outcome %q attempts %q kind %q rerunnable %v prominent %v; want %q %q %q %v %v",
					row.Outcome, row.Attempts, row.Kind, row.Rerunnable, row.Prominent,
					tt.outcome, tt.attempts, tt.kind, tt.rerunnable, tt.prominent)
			}
			if row.Slot.Local != "2026-11-30T03:17:00+00:00" || row.SlotUnix != slot.Unix() {
				t.Errorf("slot %q (%d), want it in London's offset", row.Slot.Local, row.SlotUnix)
			}
		})
	}
}

func TestExcerpt(t *testing.T) {
	t.Parallel()
	long := ""
	for range 30 {
		long += "abcdef"
	}
	for _, tt := range []struct{ in, want string }{
		{"", ""},
		{"connection refused", "connection refused"},
		{"panic: disk full\ngoroutine 7 [running]:\nmain.f()", "panic: disk full"},
		{long, long[:maxExcerpt] + "…"},
	} {
		if got := excerpt(tt.in); got != tt.want {
			t.Errorf("excerpt(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// The overview puts what needs a person first and counts it in one line.
func TestSummaryAndPausedNote(t *testing.T) {
	t.Parallel()
	counts := map[runtime.Status]int{runtime.StatusOK: 2, runtime.StatusRunning: 1, runtime.StatusFailing: 2,
		runtime.StatusPaused: 1, runtime.StatusLate: 1, runtime.StatusUnknown: 0}
	parts, line := summary(counts)
	if want := "2 failing · 1 late · 1 paused · 1 running · 2 ok"; line != want {
		t.Errorf("summary %q, want %q", line, want)
	}
	if len(parts) != 5 || parts[0].Href != "?status=failing" || parts[4].Count != 2 {
		t.Errorf("summary parts %+v", parts)
	}
	if _, line := summary(nil); line != "no schedules" {
		t.Errorf("empty summary %q", line)
	}
	now := time.Date(2026, 12, 1, 3, 20, 0, 0, time.UTC)
	reg := registry.MustNew(registry.Schedule{Name: "b-paused", Expr: "17 3 * * *", Handler: func(context.Context, registry.Occurrence) error { return nil }})
	st := runtime.ScheduleState{Schedule: reg.Schedules()[0], Status: runtime.StatusPaused,
		Paused: &runtime.Pause{Reason: "migrating the table", Actor: "alice", At: now.Add(-3 * time.Minute)}}
	rows := (&admin{}).rows(runtime.Snapshot{At: now, Schedules: []runtime.ScheduleState{st}}, true)
	if got, want := rows[0].PausedNote, "paused by alice 3 min ago: migrating the table"; got != want {
		t.Errorf("paused note %q, want %q", got, want)
	}
}

// What keeps schedules from running is said above the table, with what to
// do about it, and on each row it concerns.
func TestWarnings(t *testing.T) {
	t.Parallel()
	noop := func(context.Context, registry.Occurrence) error { return nil }
	reg := registry.MustNew(
		registry.Schedule{Name: "prune", Expr: "17 3 * * *", Queue: "maintenance", Handler: noop},
		registry.Schedule{Name: "vacuum", Expr: "17 4 * * *", Queue: "maintenance", Handler: noop},
		registry.Schedule{Name: "digest", Expr: "0 8 * * *", Queue: "default", Handler: noop})
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	snap := runtime.Snapshot{At: now, Unserved: []string{"maintenance"},
		RedisUnsafe:      "maxmemory-policy is allkeys-lru: Redis may evict the lease and the cursors",
		DuplicateReplica: `replica name "web-1" is used by two processes on this namespace (instances a and b): give each replica its own Replica name`,
		LostWrites: []runtime.LostWrites{{At: now.Add(-5 * time.Minute), Replica: "web-2", Reason: "the store's epoch is gone",
			From: now.Add(-20 * time.Minute), To: now.Add(-4 * time.Minute)}}}
	for _, s := range reg.Schedules() {
		snap.Schedules = append(snap.Schedules, runtime.ScheduleState{Schedule: s, Status: runtime.StatusOK})
	}
	want := []string{
		"This replica will not lead: maxmemory-policy is allkeys-lru: Redis may evict the lease and the cursors.",
		`Two processes share a name, so the page cannot tell them apart: replica name "web-1" is used by two processes on this namespace (instances a and b): give each replica its own Replica name.`,
		`No asynq server listens to queue "maintenance": occurrences of prune and vacuum are enqueued and wait. Add the queue to a worker's asynq.Config.Queues.`,
		"Redis lost data (the store's epoch is gone), noticed by web-2 5 min ago: slots from 2026-12-01T08:40:00Z to 2026-12-01T08:56:00Z may not have run. Re-run the ones whose work is needed, or backfill the range.",
	}
	if got := warnings(snap, reg.Schedules()); !slices.Equal(got, want) {
		t.Errorf("warnings:\n%q\nwant\n%q", got, want)
	}
	if got := warnings(runtime.Snapshot{At: now}, reg.Schedules()); len(got) != 0 {
		t.Errorf("a healthy snapshot warns %q", got)
	}
	for _, row := range (&admin{}).rows(snap, true) {
		if want := row.Schedule.Queue == "maintenance"; row.Unserved != want {
			t.Errorf("%s: unserved %v, want %v", row.Schedule.Name, row.Unserved, want)
		}
	}
}

// A failed slot that a re-run has since done stops asking for attention;
// one whose re-run failed too (as does that re-run), or that no re-run
// touched, keeps asking.
func TestHistoryRowsMarkWhatARerunMadeUp(t *testing.T) {
	t.Parallel()
	reg := registry.MustNew(registry.Schedule{Name: "prune", Expr: "17 3 * * *",
		Handler: func(context.Context, registry.Occurrence) error { return nil }})
	s, _ := reg.Lookup("prune")
	night := func(d int) time.Time { return time.Date(2026, 11, d, 3, 17, 0, 0, time.UTC) }
	rec := func(id string, slot time.Time, o runtime.Outcome) runtime.Record {
		return runtime.Record{ID: id, Schedule: "prune", Slot: slot, Outcome: o}
	}
	history := []runtime.Record{ // newest first
		rec("cron:prune:rerun:1764299820:b", night(28), runtime.OutcomeFailed),
		rec("cron:prune:rerun:1764213420:a", night(27), runtime.OutcomeSucceeded),
		rec("cron:prune:1764299820", night(28), runtime.OutcomeFailed),
		rec("cron:prune:1764213420", night(27), runtime.OutcomeMissed),
		rec("cron:prune:1764127020", night(26), runtime.OutcomePaused),
	}
	rows := historyRows(history, s, night(29))
	for _, tt := range []struct {
		i                 int
		prominent, madeUp bool
	}{{0, true, false}, {1, false, false}, {2, true, false}, {3, false, true}, {4, true, false}} {
		if rows[tt.i].Prominent != tt.prominent || rows[tt.i].MadeUp != tt.madeUp {
			t.Errorf("%s: prominent %v made up %v, want %v %v", rows[tt.i].ID, rows[tt.i].Prominent, rows[tt.i].MadeUp, tt.prominent, tt.madeUp)
		}
	}
}

// The totals add up as a person reads them: manual runs are enqueued too,
// so a schedule run once by hand and never on schedule does not read "0
// enqueued, 1 succeeded".
func TestTotalsAddUp(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		c    runtime.Counters
		want string
	}{
		{runtime.Counters{Enqueued: 62, Manual: 1, Succeeded: 63},
			"63 enqueued (62 on schedule, 1 by hand): 63 succeeded, 0 failed attempts · not run: 0 missed, 0 skipped, 0 paused"},
		{runtime.Counters{Manual: 1, Succeeded: 1},
			"1 enqueued (0 on schedule, 1 by hand): 1 succeeded, 0 failed attempts · not run: 0 missed, 0 skipped, 0 paused"},
		{runtime.Counters{Enqueued: 30, Succeeded: 29, Failed: 1, Missed: 2, Skipped: 3, Paused: 40},
			"30 enqueued (30 on schedule, 0 by hand): 29 succeeded, 1 failed attempt · not run: 2 missed, 3 skipped, 40 paused"},
	} {
		if got := totals(tt.c); got != tt.want {
			t.Errorf("totals(%+v)\n got %q\nwant %q", tt.c, got, tt.want)
		}
	}
}
