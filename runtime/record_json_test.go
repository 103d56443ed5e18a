package runtime_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/belfry/belfry/runtime"
)

// A record's JSON claims a task only for an occurrence that was enqueued,
// and reads back into the same record either way.
func TestRecordJSON(t *testing.T) {
	t.Parallel()
	slot := time.Date(2026, 12, 3, 14, 38, 0, 0, time.UTC)
	for _, tt := range []struct {
		rec  runtime.Record
		want []string
	}{
		{runtime.Record{ID: "cron:ns/tick:1", Schedule: "tick", Slot: slot, Outcome: runtime.OutcomePaused, RecordedAt: slot.Add(time.Millisecond)},
			[]string{`"task_id":null`, `"occurrence_id":"cron:ns/tick:1"`, `"recorded_at":"2026-12-03T14:38:00.001Z"`}},
		// A slot waiting behind the running occurrence (overlap=buffer_one)
		// has no task yet.
		{runtime.Record{ID: "cron:ns/tick:3", Schedule: "tick", Slot: slot, Outcome: runtime.OutcomeBuffered, RecordedAt: slot.Add(time.Millisecond)},
			[]string{`"task_id":null`, `"occurrence_id":"cron:ns/tick:3"`, `"recorded_at":"2026-12-03T14:38:00.001Z"`}},
		{runtime.Record{ID: "cron:ns/tick:2", Schedule: "tick", Slot: slot, Outcome: runtime.OutcomeSucceeded, EnqueuedAt: slot},
			[]string{`"task_id":"cron:ns/tick:2"`, `"occurrence_id":"cron:ns/tick:2"`, `"enqueued_at":"2026-12-03T14:38:00Z"`}},
	} {
		b, err := json.Marshal(tt.rec)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range tt.want {
			if !strings.Contains(string(b), w) {
				t.Errorf("%s: JSON lacks %s: %s", tt.rec.Outcome, w, b)
			}
		}
		var back runtime.Record
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if back != tt.rec {
			t.Errorf("%s: read back %+v, want %+v", tt.rec.Outcome, back, tt.rec)
		}
	}
}
