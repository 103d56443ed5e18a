package core

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/internal/store"
)

// The planner's decisions, without Redis or real time.

func sched(t *testing.T, expr, zone string, misfire registry.Misfire) *registry.Schedule {
	t.Helper()
	reg, err := registry.New(registry.Schedule{Name: "s", Expr: expr, Zone: zone, Misfire: misfire,
		Handler: func(_ context.Context, _ registry.Occurrence) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := reg.Lookup("s")
	return s
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func rfc(ts []time.Time) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.UTC().Format(time.RFC3339)
	}
	return out
}

func TestPlanSlots(t *testing.T) {
	for _, tt := range []struct {
		name            string
		expr, zone      string
		misfire         registry.Misfire
		cursor, now     string
		grace           time.Duration
		enqueue, missed []string
		nMissed         int
		cursorAfter     string
	}{
		{
			name: "on time", expr: "*/10 * * * * *", cursor: "2026-11-29T03:00:00Z", now: "2026-11-29T03:00:10Z", grace: time.Minute,
			enqueue: []string{"2026-11-29T03:00:10Z"}, cursorAfter: "2026-11-29T03:00:10Z",
		},
		{
			name: "late within grace: all enqueued", expr: "*/10 * * * * *", cursor: "2026-11-29T03:00:00Z", now: "2026-11-29T03:00:35Z", grace: time.Minute,
			enqueue: []string{"2026-11-29T03:00:10Z", "2026-11-29T03:00:20Z", "2026-11-29T03:00:30Z"}, cursorAfter: "2026-11-29T03:00:30Z",
		},
		{
			name: "older than grace: missed, misfire skip", expr: "*/10 * * * * *", cursor: "2026-11-29T03:00:00Z", now: "2026-11-29T03:00:35Z", grace: 10 * time.Second,
			enqueue: []string{"2026-11-29T03:00:30Z"}, missed: []string{"2026-11-29T03:00:10Z", "2026-11-29T03:00:20Z"}, nMissed: 2,
			cursorAfter: "2026-11-29T03:00:30Z",
		},
		{
			name: "misfire latest runs the newest missed when nothing else is due", expr: "0 3 * * *", misfire: registry.MisfireLatest,
			cursor: "2026-11-26T03:00:00Z", now: "2026-11-29T09:00:00Z", grace: 5 * time.Minute,
			enqueue: []string{"2026-11-29T03:00:00Z"}, missed: []string{"2026-11-27T03:00:00Z", "2026-11-28T03:00:00Z"}, nMissed: 2,
			cursorAfter: "2026-11-29T03:00:00Z",
		},
		{
			name: "misfire latest with a slot due: the due one only", expr: "*/10 * * * * *", misfire: registry.MisfireLatest,
			cursor: "2026-11-29T03:00:00Z", now: "2026-11-29T03:00:35Z", grace: 10 * time.Second,
			enqueue: []string{"2026-11-29T03:00:30Z"}, missed: []string{"2026-11-29T03:00:10Z", "2026-11-29T03:00:20Z"}, nMissed: 2,
			cursorAfter: "2026-11-29T03:00:30Z",
		},
		{
			name: "records only the newest missed slots, counts all", expr: "* * * * * *", cursor: "2026-11-29T03:00:00Z", now: "2026-11-29T03:01:00Z", grace: 5 * time.Second,
			enqueue: []string{"2026-11-29T03:00:55Z", "2026-11-29T03:00:56Z", "2026-11-29T03:00:57Z", "2026-11-29T03:00:58Z", "2026-11-29T03:00:59Z", "2026-11-29T03:01:00Z"},
			missed: []string{"2026-11-29T03:00:45Z", "2026-11-29T03:00:46Z", "2026-11-29T03:00:47Z", "2026-11-29T03:00:48Z", "2026-11-29T03:00:49Z",
				"2026-11-29T03:00:50Z", "2026-11-29T03:00:51Z", "2026-11-29T03:00:52Z", "2026-11-29T03:00:53Z", "2026-11-29T03:00:54Z"},
			nMissed: 54, cursorAfter: "2026-11-29T03:01:00Z",
		},
		{
			// New York springs forward at 02:00 on 2026-03-08: 02:30 does
			// not exist and the fixed-time slot runs at 03:00 EDT.
			name: "DST gap day", expr: "30 2 * * *", zone: "America/New_York", cursor: "2026-03-07T07:30:00Z", now: "2026-03-08T07:00:00Z", grace: time.Minute,
			enqueue: []string{"2026-03-08T07:00:00Z"}, cursorAfter: "2026-03-08T07:00:00Z",
		},
		{
			// Falls back at 02:00 EDT on 2026-11-01: a wildcard hour runs at
			// both 01:00s.
			name: "DST fold day", expr: "0 * * * *", zone: "America/New_York", cursor: "2026-11-01T04:30:00Z", now: "2026-11-01T06:00:00Z", grace: 2 * time.Hour,
			enqueue: []string{"2026-11-01T05:00:00Z", "2026-11-01T06:00:00Z"}, cursorAfter: "2026-11-01T06:00:00Z",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := sched(t, tt.expr, tt.zone, tt.misfire)
			cursor, now := utc(tt.cursor), utc(tt.now)
			p := planSlots(registry.Scope{Schedule: s.Name}, s, s.Next(cursor), cursor, now, tt.grace)
			if got := rfc(p.enqueue); !equal(got, tt.enqueue) {
				t.Errorf("enqueue %v, want %v", got, tt.enqueue)
			}
			if got := rfc(p.missed); !equal(got, tt.missed) {
				t.Errorf("missed records %v, want %v", got, tt.missed)
			}
			if p.nMissed != tt.nMissed {
				t.Errorf("missed count %d, want %d", p.nMissed, tt.nMissed)
			}
			if got := p.cursor.UTC().Format(time.RFC3339); got != tt.cursorAfter {
				t.Errorf("cursor %s, want %s", got, tt.cursorAfter)
			}
		})
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A backlog longer than maxSlotsPerDispatch is counted in one step; the
// cursor lands on its newest slot (so the next pass does not count it
// again) and misfire=latest runs that newest slot, not one from the start.
func TestPlanSlotsBacklogBeyondTheCap(t *testing.T) {
	for _, misfire := range []registry.Misfire{registry.MisfireSkip, registry.MisfireLatest} {
		t.Run(string(misfire), func(t *testing.T) {
			s := sched(t, "* * * * * *", "", misfire)
			now := utc("2026-11-29T12:00:00Z")
			cursor := now.Add(-2 * maxSlotsPerDispatch * time.Second) // 20,000 slots behind
			const grace = 5 * time.Second
			p := planSlots(registry.Scope{Schedule: s.Name}, s, s.Next(cursor), cursor, now, grace)
			wantMissed := 2*maxSlotsPerDispatch - 6 // every slot before now-5s; six are within grace
			enqueue := []string{"2026-11-29T11:59:55Z", "2026-11-29T11:59:56Z", "2026-11-29T11:59:57Z", "2026-11-29T11:59:58Z", "2026-11-29T11:59:59Z", "2026-11-29T12:00:00Z"}
			// Something is due within grace, so latest changes nothing.
			if p.nMissed != wantMissed {
				t.Errorf("missed %d, want %d", p.nMissed, wantMissed)
			}
			if got := rfc(p.enqueue); !equal(got, enqueue) {
				t.Errorf("enqueue %v, want %v", got, enqueue)
			}
			if got := rfc(p.missed); len(got) != maxMissedRecords || got[len(got)-1] != "2026-11-29T11:59:54Z" {
				t.Errorf("missed records %v, want the newest %d ending 11:59:54", got, maxMissedRecords)
			}
			if !p.cursor.Equal(now) {
				t.Errorf("cursor %s, want %s", p.cursor.UTC(), now)
			}
		})
	}
	t.Run("latest with nothing in grace", func(t *testing.T) {
		s := sched(t, "0 * * * *", "", registry.MisfireLatest) // hourly
		now := utc("2026-11-29T12:30:00Z")
		cursor := now.Add(-2 * maxSlotsPerDispatch * time.Hour)
		p := planSlots(registry.Scope{Schedule: s.Name}, s, s.Next(cursor), cursor, now, 5*time.Minute)
		if got := rfc(p.enqueue); !equal(got, []string{"2026-11-29T12:00:00Z"}) {
			t.Errorf("misfire=latest enqueued %v, want the newest missed slot 12:00", got)
		}
		if !p.cursor.Equal(utc("2026-11-29T12:00:00Z")) {
			t.Errorf("cursor %s, want 12:00: the next pass must not count the backlog again", p.cursor.UTC())
		}
		if p.nMissed != 2*maxSlotsPerDispatch-1 {
			t.Errorf("missed %d, want %d", p.nMissed, 2*maxSlotsPerDispatch-1)
		}
	})
	t.Run("backlog within grace stops at the cap", func(t *testing.T) {
		s := sched(t, "* * * * * *", "", registry.MisfireSkip)
		now := utc("2026-11-29T12:00:00Z")
		cursor := now.Add(-3 * maxSlotsPerDispatch * time.Second)
		p := planSlots(registry.Scope{Schedule: s.Name}, s, s.Next(cursor), cursor, now, 24*time.Hour)
		if len(p.enqueue) != maxSlotsPerDispatch || p.nMissed != 0 {
			t.Errorf("enqueue %d, missed %d; want the first %d, none missed", len(p.enqueue), p.nMissed, maxSlotsPerDispatch)
		}
		if !p.cursor.Equal(p.enqueue[len(p.enqueue)-1]) {
			t.Errorf("cursor %s, want the last enqueued slot", p.cursor.UTC())
		}
	})
}

// A failed enqueue keeps the cursor just before the failed slot, so the
// next pass finds that slot again; what was missed before it is recorded.
func TestPlanFailedEnqueueKeepsTheCursorBeforeIt(t *testing.T) {
	s := sched(t, "*/10 * * * * *", "", registry.MisfireSkip)
	cursor, now := utc("2026-11-29T03:00:00Z"), utc("2026-11-29T03:00:45Z")
	p := planSlots(registry.Scope{Schedule: s.Name}, s, s.Next(cursor), cursor, now, 20*time.Second) // missed 10, 20; enqueue 30, 40
	p.failedAt(0, errTest)
	if want := utc("2026-11-29T03:00:20Z"); !p.cursor.Equal(want) {
		t.Errorf("after the first enqueue failed the cursor is %s, want the newest missed slot %s", p.cursor.UTC(), want)
	}
	if s.Next(p.cursor) != utc("2026-11-29T03:00:30Z") {
		t.Error("the next pass would not find the failed slot again")
	}
	c := p.commit(now)
	if len(c.Recs) != 2 || c.Counts[string(OutcomeMissed)] != 2 {
		t.Errorf("commit %+v, want the two missed slots recorded and counted", c)
	}

	p = planSlots(registry.Scope{Schedule: s.Name}, s, s.Next(cursor), cursor, now, time.Minute) // enqueue 10..40
	p.failedAt(2, errTest)
	if want := utc("2026-11-29T03:00:20Z"); !p.cursor.Equal(want) || len(p.enqueue) != 2 {
		t.Errorf("after the third enqueue failed: cursor %s, %d kept; want %s, 2", p.cursor.UTC(), len(p.enqueue), want)
	}

	p = planSlots(registry.Scope{Schedule: s.Name}, s, s.Next(cursor), cursor, now, time.Minute)
	p.failedAt(0, errTest)
	if !s.Next(p.cursor).Equal(utc("2026-11-29T03:00:10Z")) {
		t.Errorf("with nothing missed the cursor %s must lead back to the first slot", p.cursor.UTC())
	}
}

var errTest = errors.New("injected")

func TestPausedPlanRecordsEveryDueSlotAndRunsNone(t *testing.T) {
	s := sched(t, "*/10 * * * * *", "", registry.MisfireSkip)
	cursor, now := utc("2026-11-29T03:00:00Z"), utc("2026-11-29T03:00:45Z")
	p := planSlots(registry.Scope{Schedule: s.Name}, s, s.Next(cursor), cursor, now, 20*time.Second) // missed 10, 20; due 30, 40
	p.pause(now, 20*time.Second)
	if len(p.enqueue) != 0 {
		t.Fatalf("a paused plan enqueues %v", rfc(p.enqueue))
	}
	c := p.commit(now)
	if c.Counts[string(OutcomePaused)] != 2 || c.Counts[string(OutcomeMissed)] != 2 || c.Counts[string(OutcomeEnqueued)] != 0 {
		t.Errorf("counts %v, want 2 paused, 2 missed, none enqueued", c.Counts)
	}
	if c.Cursor != now.Add(-5*time.Second).Unix() || c.LastID != "" {
		t.Errorf("cursor %d last id %q; want the cursor past the paused slots (03:00:40) and no last ID", c.Cursor, c.LastID)
	}
}

func TestScheduleStatus(t *testing.T) {
	s := sched(t, "17 3 * * *", "", registry.MisfireSkip)
	s.Timeout = 20 * time.Minute
	const grace = 5 * time.Minute
	firstSeen := utc("2026-11-01T00:00:00Z")
	status := func(paused, failing bool, active Outcome, c Counters, now string) Status {
		return scheduleStatus(statusInputs{paused: paused, failing: failing, active: active, lateAt: lateAt(s, c, grace)}, utc(now))
	}
	if got := status(true, true, "", Counters{FirstSeen: firstSeen}, "2026-11-29T09:00:00Z"); got != StatusPaused {
		t.Errorf("a paused failing schedule is %s, want paused", got)
	}
	for _, tt := range []struct {
		name    string
		now     string
		failing bool
		active  Outcome
		c       Counters
		want    Status
	}{
		{"succeeded last night", "2026-11-29T09:00:00Z", false, "", Counters{FirstSeen: firstSeen, LastSlotSuccess: utc("2026-11-29T03:18:00Z")}, StatusOK},
		{"no success since last night's slot", "2026-11-29T09:00:00Z", false, "", Counters{FirstSeen: firstSeen, LastSlotSuccess: utc("2026-11-28T03:18:00Z")}, StatusLate},
		{"not late before grace + timeout", "2026-11-29T03:40:00Z", false, "", Counters{FirstSeen: firstSeen, LastSlotSuccess: utc("2026-11-28T03:18:00Z")}, StatusOK},
		{"late just after grace + timeout", "2026-11-29T03:43:00Z", false, "", Counters{FirstSeen: firstSeen, LastSlotSuccess: utc("2026-11-28T03:18:00Z")}, StatusLate},
		{"late at grace + timeout exactly", "2026-11-29T03:42:00Z", false, "", Counters{FirstSeen: firstSeen, LastSlotSuccess: utc("2026-11-28T03:18:00Z")}, StatusLate},
		{"failing beats late", "2026-11-29T09:00:00Z", true, "", Counters{FirstSeen: firstSeen}, StatusFailing},
		{"still failing while the next run runs", "2026-11-29T09:00:00Z", true, OutcomeRunning,
			Counters{FirstSeen: firstSeen, LastSlotSuccess: utc("2026-11-29T08:00:00Z")}, StatusFailing},
		{"running", "2026-11-29T03:20:00Z", false, OutcomeRunning, Counters{FirstSeen: firstSeen, LastSlotSuccess: utc("2026-11-28T03:18:00Z")}, StatusRunning},
		{"retrying is not over yet", "2026-11-29T03:20:00Z", false, OutcomeRetrying, Counters{FirstSeen: firstSeen, LastSlotSuccess: utc("2026-11-28T03:18:00Z")}, StatusRunning},
		{"slots before first seen are not late", "2026-11-29T09:00:00Z", false, "", Counters{FirstSeen: utc("2026-11-29T08:00:00Z")}, StatusOK},
		{"never seen by a scheduler", "2026-11-29T09:00:00Z", false, "", Counters{}, StatusOK},
		{"a run now does not do the late slot's work", "2026-11-29T09:00:00Z", false, "",
			Counters{FirstSeen: firstSeen, LastSuccess: utc("2026-11-29T08:00:00Z"), LastSlotSuccess: utc("2026-11-28T03:18:00Z")}, StatusLate},
		{"slots before the last resume are not late", "2026-11-29T09:00:00Z", false, "",
			Counters{FirstSeen: firstSeen, LastSlotSuccess: utc("2026-11-20T03:18:00Z"), LastResume: utc("2026-11-29T08:00:00Z")}, StatusOK},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := status(false, tt.failing, tt.active, tt.c, tt.now); got != tt.want {
				t.Errorf("status %s, want %s", got, tt.want)
			}
		})
	}
}

// lateAt names the moment the old per-request rule (the newest slot due
// grace + timeout ago has no success since the last of first seen, resume
// and slot success) first says late, for every hour of a day.
func TestLateAtAgreesWithTheDueSlotRule(t *testing.T) {
	s := sched(t, "*/20 9-17 * * 1-5", "", registry.MisfireSkip)
	s.Timeout = 7 * time.Minute
	const grace = 3 * time.Minute
	c := Counters{FirstSeen: utc("2026-11-01T00:00:00Z"), LastSlotSuccess: utc("2026-11-27T16:40:31Z")}
	due := func(now time.Time) bool {
		d := s.Prev(now.Add(-grace - s.Timeout))
		return !d.IsZero() && d.After(c.FirstSeen) && d.After(c.LastResume) && c.LastSlotSuccess.Before(d)
	}
	at := lateAt(s, c, grace)
	for now := utc("2026-11-27T16:00:00Z"); now.Before(utc("2026-12-01T00:00:00Z")); now = now.Add(time.Minute) {
		if got, want := !now.Before(at), due(now); got != want {
			t.Fatalf("at %s: lateAt %s says late=%v, the due-slot rule %v", now.Format(time.RFC3339), at.Format(time.RFC3339), got, want)
		}
	}
}

// misfire=all runs the slots an outage missed, oldest first, up to the cap
// (the newest of them), and records the rest as missed.
func TestPlanMisfireAllCatchesUpToTheCap(t *testing.T) {
	daily := sched(t, "0 3 * * *", "", registry.MisfireAll)
	now := utc("2026-11-29T09:00:00Z")
	p := planSlots(registry.Scope{Schedule: daily.Name}, daily, daily.Next(utc("2026-11-25T03:00:00Z")), utc("2026-11-25T03:00:00Z"), now, 5*time.Minute)
	if got := rfc(p.enqueue); !equal(got, []string{"2026-11-26T03:00:00Z", "2026-11-27T03:00:00Z", "2026-11-28T03:00:00Z", "2026-11-29T03:00:00Z"}) || p.nMissed != 0 {
		t.Errorf("four missed nights: enqueue %v, missed %d; want all four, none missed", got, p.nMissed)
	}

	secondly := sched(t, "* * * * * *", "", registry.MisfireAll)
	for _, behind := range []int{1000, 2 * maxSlotsPerDispatch} {
		cursor := now.Add(-time.Duration(behind) * time.Second)
		p := planSlots(registry.Scope{Schedule: secondly.Name}, secondly, secondly.Next(cursor), cursor, now, 5*time.Second)
		inGrace := 6
		if len(p.enqueue) != registry.MisfireAllCap+inGrace {
			t.Fatalf("%d behind: %d enqueued, want the cap %d plus %d within grace", behind, len(p.enqueue), registry.MisfireAllCap, inGrace)
		}
		if first := p.enqueue[0]; !first.Equal(now.Add(-time.Duration(registry.MisfireAllCap+5) * time.Second)) {
			t.Errorf("%d behind: the catch-up starts at %s, want the %d newest missed slots", behind, first.UTC(), registry.MisfireAllCap)
		}
		for i := 1; i < len(p.enqueue); i++ {
			if !p.enqueue[i].Equal(p.enqueue[i-1].Add(time.Second)) {
				t.Fatalf("%d behind: enqueue not contiguous and in order at %d: %s then %s", behind, i, p.enqueue[i-1].UTC(), p.enqueue[i].UTC())
			}
		}
		if want := behind - inGrace - registry.MisfireAllCap; p.nMissed != want {
			t.Errorf("%d behind: missed %d, want %d", behind, p.nMissed, want)
		}
		if !p.cursor.Equal(now) {
			t.Errorf("%d behind: cursor %s, want now", behind, p.cursor.UTC())
		}
	}
}

// A pause stops what would run; catch-up slots of misfire=all (older than
// grace) stay missed, as they would be without the catch-up.
func TestPausedPlanLeavesCatchUpSlotsMissed(t *testing.T) {
	s := sched(t, "*/10 * * * * *", "", registry.MisfireAll)
	cursor, now := utc("2026-11-29T03:00:00Z"), utc("2026-11-29T03:00:45Z")
	p := planSlots(registry.Scope{Schedule: s.Name}, s, s.Next(cursor), cursor, now, 20*time.Second) // catch-up 10, 20; due 30, 40
	p.pause(now, 20*time.Second)
	c := p.commit(now)
	if c.Counts[string(OutcomePaused)] != 2 || c.Counts[string(OutcomeMissed)] != 2 {
		t.Errorf("counts %v, want the two due slots paused and the two catch-up slots missed", c.Counts)
	}
}

func TestOnlySchedulesFiringMoreThanOnceAMinuteKeepAShorterHistory(t *testing.T) {
	reg := registry.MustNew(
		registry.Schedule{Name: "every-second", Expr: "* * * * * *", Handler: noopHandler},
		registry.Schedule{Name: "every-20s", Expr: "*/20 * * * * *", Zone: "America/New_York", Handler: noopHandler},
		registry.Schedule{Name: "every-10s", Expr: "@every 10s", Handler: noopHandler},
		registry.Schedule{Name: "every-minute", Expr: "* * * * *", Handler: noopHandler},
		registry.Schedule{Name: "once-a-minute-with-seconds", Expr: "30 * * * * *", Handler: noopHandler},
		registry.Schedule{Name: "a-burst-once-a-day", Expr: "* 0 3 * * *", Handler: noopHandler},
		registry.Schedule{Name: "nightly", Expr: "17 3 * * *", Handler: noopHandler},
	)
	got := historyLimits(reg, HistoryLimitDefault)
	want := map[string]int{"every-second": frequentHistory, "every-20s": frequentHistory, "every-10s": frequentHistory}
	if !maps.Equal(got, want) {
		t.Errorf("history limits %v, want %v", got, want)
	}
	if got := historyLimits(reg, 10); len(got) != 0 {
		t.Errorf("with HistoryLimit 10 below the frequent one: %v, want none", got)
	}
}

func noopHandler(context.Context, registry.Occurrence) error { return nil }

// A leader that reaches slots only after a pause ended records those that
// came due during the pause as paused and runs the rest.
func TestSlotsDueDuringAPauseThatEndedAreRecordedPaused(t *testing.T) {
	s := sched(t, "*/10 * * * * *", "", registry.MisfireSkip)
	cursor, now := utc("2026-11-29T03:00:00Z"), utc("2026-11-29T03:00:45Z")
	p := planSlots(registry.Scope{Schedule: s.Name}, s, s.Next(cursor), cursor, now, time.Minute) // due 10..40
	p.pausedBetween(utc("2026-11-29T03:00:15Z"), utc("2026-11-29T03:00:30Z"), now)
	if got := rfc(p.enqueue); len(got) != 2 || got[0] != "2026-11-29T03:00:10Z" || got[1] != "2026-11-29T03:00:40Z" {
		t.Errorf("enqueue %v, want the slots before the pause and after the resume", got)
	}
	c := p.commit(now)
	if c.Counts[string(OutcomePaused)] != 2 || !p.cursor.Equal(utc("2026-11-29T03:00:40Z")) {
		t.Errorf("counts %v, cursor %s; want 2 paused and the cursor on the newest slot", c.Counts, p.cursor.UTC())
	}
}

// An enqueue that fails before a pause window leaves the cursor before the
// window: the slots in it are recorded paused by the pass that passes
// them, once, not also by the failed one.
func TestAFailedEnqueueBeforeAPauseWindowRecordsItsSlotsOnce(t *testing.T) {
	s := sched(t, "*/10 * * * * *", "", registry.MisfireSkip)
	cursor, now := utc("2026-11-29T03:00:00Z"), utc("2026-11-29T03:00:45Z")
	for k, wantCursor := range []string{"2026-11-29T03:00:09Z", "2026-11-29T03:00:10Z"} {
		p := planSlots(registry.Scope{Schedule: s.Name}, s, s.Next(cursor), cursor, now, time.Minute) // due 10..40
		p.pausedBetween(utc("2026-11-29T03:00:15Z"), utc("2026-11-29T03:00:30Z"), now)
		if k == 1 {
			p.done = append(p.done, store.Rec{Slot: p.enqueue[0].Unix(), Outcome: string(OutcomeEnqueued)})
		}
		p.failedAt(k, errTest)
		c := p.commit(now)
		if c.Counts[string(OutcomePaused)] != 0 || !p.cursor.Equal(utc(wantCursor)) {
			t.Errorf("enqueue %d failed: counts %v, cursor %s; want none paused yet and the cursor at %s", k, c.Counts, p.cursor.UTC(), wantCursor)
		}
	}
}
