package metrics_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
	"github.com/belfry/belfry/runtime/metrics"
)

// Without Redis the collector still exports every schedule's next run and
// says Redis is not up; scraping never fails.
func TestHandlerServesTheRuntimesMetrics(t *testing.T) {
	reg := registry.MustNew(registry.Schedule{Name: "nightly", Expr: "17 3 * * *", Handler: func(ctx context.Context, occ registry.Occurrence) error { return nil }})
	rt, err := runtime.New(reg, runtime.Options{Replica: "r0"})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	metrics.Handler(rt).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{
		`belfry_schedule_next_run_timestamp_seconds{schedule="nightly"}`,
		`belfry_schedule_late{schedule="nightly"} 0`,
		`belfry_leader{replica="r0"} 0`,
		"belfry_redis_up 0",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s:\n%s", want, body)
		}
	}
}
