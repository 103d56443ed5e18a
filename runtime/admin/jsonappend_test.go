package admin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/belfry/belfry/internal/jsontest"
	"github.com/belfry/belfry/runtime"
)

// sampleSchedules are apiSchedule values with every optional part absent and
// present, in several combinations, and awkward text in every string.
func sampleSchedules() []apiSchedule {
	at := time.Date(2026, 12, 2, 3, 17, 0, 123456789, time.FixedZone("", 3600))
	utc := time.Date(2026, 11, 30, 23, 59, 59, 0, time.UTC)
	var out []apiSchedule
	for i, text := range jsontest.AwkwardStrings {
		next, nextUTC := "2026-12-03T03:17:00+01:00", text
		s := apiSchedule{Name: "job-" + text, Expression: "17 3 * * *", Zone: "Europe/Berlin", Queue: text,
			Timeout: "20m0s", MaxRetry: i, Grace: "1m0s", Overlap: "allow", Misfire: text, Status: runtime.StatusOK}
		switch i % 3 {
		case 0:
			s.Source = "jobs/prune.go:12:" + text
			s.NextRun, s.NextRunUTC = &next, &nextUTC
			s.Paused = &runtime.Pause{Reason: text, At: at}
			s.Counters = &apiCounters{Enqueued: 120, Manual: 1, Missed: -3, Skipped: 4, Buffered: 6, Replaced: 7, Paused: 5, Succeeded: 118,
				Failed: 2, LastEnqueue: &utc, LastSuccess: &at}
			s.LastRun = &runtime.Record{ID: "cron:x/" + text, Schedule: text, Slot: utc, Manual: true,
				Outcome: runtime.OutcomeFailed, EnqueuedAt: utc, StartedAt: at, FinishedAt: at.Add(time.Second),
				DurationMS: 1000, Error: text, Attempt: 2, MaxRetry: 3, Replica: text, Actor: text, Member: text,
				Progress: &runtime.Progress{Cursor: text, Done: i%2 == 0, Items: 1200, Total: 10000, Resumptions: 2,
					StartedAt: utc, UpdatedAt: at, Rate: 812.25 + float64(i), Estimate: at.Add(time.Hour)}}
			s.History = []runtime.Record{*s.LastRun, {ID: "b", Slot: utc, Progress: &runtime.Progress{StartedAt: at}}}
		case 1:
			s.Paused = &runtime.Pause{Reason: "why", Actor: text, At: utc}
			s.LastRun = &runtime.Record{ID: "cron:x", Schedule: "x", Outcome: runtime.OutcomeEnqueued}
			s.Counters = &apiCounters{LastFailure: &utc}
			s.Missing = []runtime.Missing{{Part: runtime.PartSchedules, Reason: text}, {Part: "b", Reason: "c"}}
			s.Status = runtime.StatusUnknown
		case 2:
			s.History = []runtime.Record{}
			if i%2 == 0 { // a slot never enqueued: task_id null
				s.History = []runtime.Record{{ID: "cron:p/" + text, Schedule: text, Slot: utc,
					Outcome: runtime.OutcomePaused, RecordedAt: at}}
			}
			s.Missing = []runtime.Missing{}
		}
		out = append(out, s)
	}
	return out
}

// Each schedule's own JSON is what encoding/json writes for it, so the
// unpaged list's bytes are those of the encoder whatever a schedule holds.
// Every field of every type written is set in some sample, so a field
// added to one of them and not to appendIndented fails here.
func TestAppendIndentedMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	samples := sampleSchedules()
	var schedules, records, pauses, counters, missing []any
	for _, s := range samples {
		schedules = append(schedules, s)
		for _, r := range s.History {
			records = append(records, r)
		}
		if s.LastRun != nil {
			records = append(records, *s.LastRun)
		}
		if s.Paused != nil {
			pauses = append(pauses, *s.Paused)
		}
		if s.Counters != nil {
			counters = append(counters, *s.Counters)
		}
		for _, m := range s.Missing {
			missing = append(missing, m)
		}
	}
	for _, values := range [][]any{schedules, records, pauses, counters, missing} {
		jsontest.EveryFieldSetSomewhere(t, values)
	}
	for i, s := range samples {
		want, err := json.MarshalIndent(s, "  ", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if got := s.appendIndented(nil); !bytes.Equal(got, want) {
			t.Errorf("schedule %d (%q): got\n%s\nwant\n%s", i, s.Name, got, want)
		}
	}
}

// A list that mixes schedules (written by appendIndented) and families
// (written by encoding/json) is still exactly the encoder's array.
func TestWriteIndentedArrayOfSchedulesAndFamilies(t *testing.T) {
	t.Parallel()
	samples := sampleSchedules()
	items := make([]any, 0, 1300)
	for i := range 1300 {
		s := samples[i%len(samples)]
		s.Name = fmt.Sprintf("job-%04d", i)
		if i%7 == 0 {
			members := int64(i)
			items = append(items, apiFamily{apiSchedule: s, Per: "tenant", Members: &members})
			continue
		}
		items = append(items, s)
	}
	checkArrayIsTheEncoders(t, "schedules and families", items)
}
