package enginetest

import (
	"context"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/core"
)

// carriedKey is the key under which idCarrier carries an occurrence's ID.
const carriedKey = "belfry-suite-occurrence"

// idCarrier is an EnqueueObserver that carries each occurrence of the
// schedule "traced" with its own ID, and nothing with the others'.
type idCarrier struct{}

func (idCarrier) BeforeEnqueue(_ context.Context, s *registry.Schedule, occ registry.Occurrence) (map[string]string, func(bool, error)) {
	if s.Name != "traced" {
		return nil, nil
	}
	return map[string]string{carriedKey: occ.ID}, nil
}

// What the EnqueueObserver asks to carry with an occurrence, the
// leader's and an operator's alike, travels with its task and reaches its
// handler through core.Carrier: each run sees its own occurrence's
// carrier, and an occurrence enqueued without one sees none.
func carrierReachesTheHandler(t *testing.T, h Harness) {
	type run struct {
		occ     registry.Occurrence
		carrier map[string]string
	}
	var mu sync.Mutex
	var runs []run
	handler := func(ctx context.Context, occ registry.Occurrence) error {
		mu.Lock()
		defer mu.Unlock()
		runs = append(runs, run{occ, core.Carrier(ctx)})
		return nil
	}
	queue := queueName("q")
	reg := mustRegistry(t, registry.Schedule{Name: "traced", Expr: "* * * * * *", Queue: queue, Handler: handler},
		registry.Schedule{Name: "untraced", Expr: "* * * * * *", Queue: queue, Handler: handler})
	b := h.NewBackend(t)
	r := newReplica(t, b, reg, "solo", replicaSettings{leaseTTL: takeoverTTL, observer: idCarrier{}})
	b.StartWorkers(t, r.rt)
	r.start()
	manual, err := r.rt.Trigger(context.Background(), "traced", "")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, "scheduled runs of both schedules and the manual run", func() bool {
		mu.Lock()
		defer mu.Unlock()
		seen := map[string]bool{}
		for _, x := range runs {
			seen[x.occ.Schedule] = seen[x.occ.Schedule] || !x.occ.Manual
			seen["manual"] = seen["manual"] || x.occ.ID == manual.ID
		}
		return seen["traced"] && seen["untraced"] && seen["manual"]
	})
	mu.Lock()
	defer mu.Unlock()
	for _, x := range runs {
		var want map[string]string
		if x.occ.Schedule == "traced" {
			want = map[string]string{carriedKey: x.occ.ID}
		}
		if !maps.Equal(x.carrier, want) || (want == nil) != (x.carrier == nil) {
			t.Errorf("%s (manual %v) ran with carrier %v, want %v", x.occ.ID, x.occ.Manual, x.carrier, want)
		}
	}
}
