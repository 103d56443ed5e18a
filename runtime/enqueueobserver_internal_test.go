package runtime

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
)

// Without an EnqueueObserver, building an occurrence's task allocates what
// encoding its payload allocates and nothing more: the leader builds one
// per due occurrence, up to a hundred thousand in a slot.
func TestTaskWithoutObserverAllocatesOnlyThePayload(t *testing.T) {
	r := &Runtime{}
	s := &registry.Schedule{Name: "tick", Queue: "default", MaxRetry: 3, Timeout: time.Minute}
	occ := registry.Occurrence{Schedule: "tick", Slot: time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC), Zone: "UTC",
		ID: "cron:ns/tick:1793610000"}
	ctx := context.Background()
	payload := testing.AllocsPerRun(100, func() { registry.EncodeOccurrence(occ) })
	task := testing.AllocsPerRun(100, func() {
		sent, enqueued := r.beforeEnqueue(ctx, s, occ)
		_ = r.task(s, sent, time.Minute)
		if enqueued != nil {
			enqueued(true, nil)
		}
	})
	if task != payload {
		t.Errorf("building a task without an observer allocates %v times, encoding its payload %v", task, payload)
	}
}

// With an observer, what it returns rides in the task's payload, and its
// done hears the enqueue's result.
func TestObserversCarrierRidesInThePayload(t *testing.T) {
	obs := &carrierObserver{carrier: map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}
	r := &Runtime{opts: Options{EnqueueObserver: obs}}
	s := &registry.Schedule{Name: "tick", Queue: "default"}
	occ := registry.Occurrence{Schedule: "tick", Slot: time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC), Zone: "UTC",
		ID: "cron:ns/tick:1793610000"}
	sent, enqueued := r.beforeEnqueue(context.Background(), s, occ)
	payload := string(r.task(s, sent, time.Minute).Payload)
	if !strings.Contains(payload, `"trace":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}`) {
		t.Errorf("payload %s lacks the observer's carrier", payload)
	}
	if obs.seen != occ.ID {
		t.Errorf("observer saw %q, want %q", obs.seen, occ.ID)
	}
	enqueued(false, nil)
	if obs.results != 1 {
		t.Errorf("done called %d times, want once", obs.results)
	}
}

type carrierObserver struct {
	carrier map[string]string
	seen    string
	results int
}

func (o *carrierObserver) BeforeEnqueue(_ context.Context, _ *registry.Schedule, occ registry.Occurrence) (map[string]string, func(bool, error)) {
	o.seen = occ.ID
	return o.carrier, func(bool, error) { o.results++ }
}
