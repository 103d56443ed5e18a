package runtime_test

import (
	"context"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
	"github.com/hibiken/asynq"
)

// headerObserver carries a fixed carrier with the occurrences of one
// schedule and nothing with the others'.
type headerObserver struct {
	schedule string
	carrier  map[string]string
}

func (o headerObserver) BeforeEnqueue(_ context.Context, s *registry.Schedule, _ registry.Occurrence) (map[string]string, func(bool, error)) {
	if s.Name != o.schedule {
		return nil, nil
	}
	return o.carrier, nil
}

// What an enqueue's observer asks to carry goes through asynq's real
// enqueue and dequeue as the task's headers and reaches the workers'
// middleware through runtime.Carrier, as a copy; a task enqueued without
// a carrier has none, and neither payload carries anything.
func TestCarrierReachesTheWorkersMiddleware(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := sharedRedis(t)
	queue := uniq("q")
	carrier := map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "tracestate": "vendor=é"}
	noop := func(context.Context, registry.Occurrence) error { return nil }
	reg := registry.MustNew(
		registry.Schedule{Name: "traced", Expr: "17 3 * * *", Queue: queue, Handler: noop},
		registry.Schedule{Name: "untraced", Expr: "17 3 * * *", Queue: queue, Handler: noop},
	)
	rt, err := runtime.New(reg, runtime.Options{Redis: rdb, Namespace: uniq("ns"), Logger: testLogger(t),
		EnqueueObserver: headerObserver{schedule: "traced", carrier: maps.Clone(carrier)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	type seen struct {
		carrier, again map[string]string
		payload        string
	}
	var mu sync.Mutex
	byID := map[string]seen{}
	peek := func(s *registry.Schedule, next registry.HandlerFunc) registry.HandlerFunc {
		return func(ctx context.Context, occ registry.Occurrence) error {
			got := runtime.Carrier(ctx)
			if got != nil {
				got["traceparent"] = "changed by the middleware"
			}
			mu.Lock()
			byID[occ.ID] = seen{carrier: got, again: runtime.Carrier(ctx), payload: string(registry.EncodeOccurrence(occ))}
			mu.Unlock()
			return next(ctx, occ)
		}
	}
	startWorker(t, rdb, queue, func(mux *asynq.ServeMux) { rt.RegisterHandlers(mux, peek) })
	traced, err := rt.Trigger(ctx, "traced", "")
	if err != nil {
		t.Fatal(err)
	}
	untraced, err := rt.Trigger(ctx, "untraced", "")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, "both runs", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(byID) == 2
	})
	mu.Lock()
	defer mu.Unlock()
	if got := byID[traced.ID].again; !maps.Equal(got, carrier) {
		t.Errorf("the traced run's carrier %q, want %q (and a copy each call)", got, carrier)
	}
	if got := byID[untraced.ID].carrier; got != nil {
		t.Errorf("the untraced run's carrier %q, want none", got)
	}
	for _, occ := range []registry.Occurrence{traced, untraced} {
		if got, want := byID[occ.ID].payload, string(registry.EncodeOccurrence(occ)); got != want {
			t.Errorf("%s ran with the occurrence %s, want %s", occ.Schedule, got, want)
		}
	}
	if got := runtime.Carrier(ctx); got != nil {
		t.Errorf("a context that is not a handler's has the carrier %q", got)
	}
}
