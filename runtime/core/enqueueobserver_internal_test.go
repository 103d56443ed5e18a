package core

import (
	"context"
	"maps"
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
		carrier, enqueued := r.beforeEnqueue(ctx, s, occ)
		_ = r.task(s, occ, carrier, time.Minute)
		if enqueued != nil {
			enqueued(true, nil)
		}
	})
	if task != payload {
		t.Errorf("building a task without an observer allocates %v times, encoding its payload %v", task, payload)
	}
}

// With an observer, what it returns rides in the task's headers, the
// payload left as it is without one, and its done hears the enqueue's
// result.
func TestObserversCarrierRidesInTheHeaders(t *testing.T) {
	carrier := map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
	obs := &carrierObserver{carrier: carrier}
	r := &Runtime{opts: Options{EnqueueObserver: obs}}
	s := &registry.Schedule{Name: "tick", Queue: "default"}
	occ := registry.Occurrence{Schedule: "tick", Slot: time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC), Zone: "UTC",
		ID: "cron:ns/tick:1793610000"}
	sent, enqueued := r.beforeEnqueue(context.Background(), s, occ)
	task := r.task(s, occ, sent, time.Minute)
	if !maps.Equal(task.Headers, carrier) {
		t.Errorf("task headers %v, want the observer's carrier %v", task.Headers, carrier)
	}
	if got, want := string(task.Payload), string(registry.EncodeOccurrence(occ)); got != want {
		t.Errorf("payload %s, want the occurrence's alone %s", got, want)
	}
	if obs.seen != occ.ID {
		t.Errorf("observer saw %q, want %q", obs.seen, occ.ID)
	}
	enqueued(false, nil)
	if obs.results != 1 {
		t.Errorf("done called %d times, want once", obs.results)
	}
}

// A carrier asynq could not carry (headers are protobuf strings, UTF-8)
// is dropped: the occurrence is enqueued untraced rather than refused.
func TestACarrierThatIsNotUTF8IsNotCarried(t *testing.T) {
	for _, carrier := range []map[string]string{{"traceparent": "\xff"}, {"\xfe": "v", "ok": "ok"}} {
		r := &Runtime{opts: Options{EnqueueObserver: &carrierObserver{carrier: carrier}}}
		s := &registry.Schedule{Name: "tick", Queue: "default"}
		occ := registry.Occurrence{Schedule: "tick", Slot: time.Unix(1793610000, 0).UTC(), Zone: "UTC", ID: "cron:ns/tick:1793610000"}
		sent, done := r.beforeEnqueue(context.Background(), s, occ)
		if task := r.task(s, occ, sent, time.Minute); task.Headers != nil {
			t.Errorf("carrier %q: task headers %q, want none", carrier, task.Headers)
		}
		if done == nil {
			t.Errorf("carrier %q: the observer's done was dropped with it", carrier)
		}
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
