package admin_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/belfry/belfry/internal/redistest"
	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
	"github.com/belfry/belfry/runtime/admin"
	"github.com/belfry/belfry/runtime/core"
	"github.com/belfry/belfry/runtime/metrics"
)

// The admin and the metrics take a runtime of package core as they take
// one of package runtime: a service on another engine mounts them without
// the Redis entry point.
func TestAdminAndMetricsServeACoreRuntime(t *testing.T) {
	t.Parallel()
	reg := registry.MustNew(registry.Schedule{Name: "nightly", Expr: "17 3 * * *", Queue: redistest.Uniq("q"),
		Handler: func(context.Context, registry.Occurrence) error { return nil }})
	rt, err := core.New(reg, core.Options{Engine: runtime.RedisEngine(sharedRedis(t)), Namespace: redistest.Uniq("ns"),
		Replica: "r0", LeaseTTL: 2 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { rt.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done; rt.Close() })
	waitFor(t, 5*time.Second, "the replica to lead", rt.Leadership().Leading)

	mux := http.NewServeMux()
	mux.Handle("/cron/", http.StripPrefix("/cron", admin.New(rt, admin.Options{Metrics: metrics.Handler(rt)})))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	for path, want := range map[string]string{
		"/cron/api/schedules": `"nightly"`,
		"/cron/metrics":       `belfry_schedules{status="ok"}`,
	} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Errorf("GET %s: %d, want 200 with %s:\n%.600s", path, resp.StatusCode, want, body)
		}
	}
}
