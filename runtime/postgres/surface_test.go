package postgres_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/admin"
	"github.com/belfry/belfry/runtime/core"
	"github.com/belfry/belfry/runtime/engine"
	"github.com/belfry/belfry/runtime/metrics"
	"github.com/belfry/belfry/runtime/postgres"
)

// warnings keeps the runtime's warnings and errors.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, strings.TrimSpace(string(p)))
	return len(p), nil
}

func (w *warnings) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.msgs)
}

// A runtime on the engine serves its admin page and API, metrics, health
// and orphans from the engine's reads — status with a paused, a failing
// and a running schedule, a family's members — without an error, and
// forgets a schedule removed from the code.
func TestTheAdminAndMetricsReadTheEngine(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := pgHarness{}.NewBackend(t)
	opts, _ := b.Replica(t)
	logged := &warnings{}
	opts.Replica, opts.LeaseTTL = "solo", 2*time.Second
	opts.Logger = slog.New(slog.NewTextHandler(logged, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ran := make(chan struct{}, 100)
	reg, err := registry.New(
		registry.Schedule{Name: "tick", Expr: "* * * * * *", Handler: func(context.Context, registry.Occurrence) error {
			select {
			case ran <- struct{}{}:
			default:
			}
			return nil
		}},
		registry.Schedule{Name: "broken", Expr: "* * * * * *", Handler: func(context.Context, registry.Occurrence) error { return errors.New("broken") }},
		registry.Schedule{Name: "nightly", Expr: "17 3 * * *", Handler: func(context.Context, registry.Occurrence) error { return nil }},
		registry.Schedule{Name: "reports", Expr: "0 9 * * *", Per: "tenant", Handler: func(context.Context, registry.Occurrence) error { return nil }},
	)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := core.New(reg, opts)
	if err != nil {
		t.Fatal(err)
	}
	b.StartWorkers(t, rt)
	runRuntime(t, rt)
	for range 2 {
		select {
		case <-ran:
		case <-time.After(10 * time.Second):
			t.Fatal("tick did not run")
		}
	}
	if err := rt.Pause(ctx, "nightly", "maintenance"); err != nil {
		t.Fatal(err)
	}
	if err := rt.Families().SetMany(ctx, "reports", []core.Member{{Key: "acme"}, {Key: "bolt", Zone: "Asia/Tokyo"}}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "broken to be recorded failed", func() bool {
		h, _ := rt.History(ctx, "broken", 1)
		return len(h) == 1 && h[0].Outcome == core.OutcomeFailed
	})
	// A schedule removed from the code leaves state behind.
	gone := configured(t, postgres.Config{Pool: b.(*pgBackend).direct}, engine.Config{Namespace: rt.Namespace(), Replica: "old"})
	if err := gone.RecordManual(ctx, engine.Commit{Name: "retired", Counts: map[string]int64{"manual": 1}}); err != nil {
		t.Fatal(err)
	}

	h := admin.New(rt, admin.Options{Metrics: metrics.Handler(rt)})
	for _, path := range []string{"/", "/schedules/tick", "/schedules/reports", "/api/schedules", "/api/schedules/broken",
		"/api/status", "/api/orphans", "/metrics", "/livez"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		body, _ := io.ReadAll(rec.Body)
		if rec.Code != http.StatusOK {
			t.Errorf("GET %s: %d %s", path, rec.Code, body)
		}
		if path == "/api/orphans" && !strings.Contains(string(body), "retired") {
			t.Errorf("GET /api/orphans = %s; want the retired schedule", body)
		}
		if path == "/metrics" && !strings.Contains(string(body), `schedule="broken"`) {
			t.Errorf("GET /metrics has no series of the broken schedule:\n%.2000s", body)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if body := rec.Body.String(); rec.Code != http.StatusServiceUnavailable || !strings.Contains(body, "broken") {
		t.Errorf("GET /healthz with a failing schedule: %d %s; want 503 naming it", rec.Code, body)
	}
	if err := rt.Forget(ctx, "retired"); err != nil {
		t.Fatal(err)
	}
	if orphans, err := rt.Orphans(ctx); err != nil || len(orphans) != 0 {
		t.Errorf("Orphans after Forget = %v, %v; want none", orphans, err)
	}
	for _, msg := range logged.all() {
		t.Errorf("the runtime logged: %s", msg)
	}
}
