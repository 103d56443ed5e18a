package postgres_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/core"
)

// When the database cannot be reached, health, the status and the log name
// Postgres: an operator paged at night reads which server to look at, and
// a runtime on Postgres never sends them to a Redis it does not have.
func TestAnUnreachableDatabaseIsNamedPostgres(t *testing.T) {
	t.Parallel()
	b := pgHarness{}.NewBackend(t)
	opts, link := b.Replica(t)
	logged := &warnings{}
	opts.Replica, opts.LeaseTTL = "solo", time.Second
	opts.Logger = slog.New(slog.NewTextHandler(logged, &slog.HandlerOptions{Level: slog.LevelWarn}))
	reg := registry.MustNew(registry.Schedule{Name: "nightly", Expr: "17 3 * * *",
		Handler: func(context.Context, registry.Occurrence) error { return nil }})
	rt, err := core.New(reg, opts)
	if err != nil {
		t.Fatal(err)
	}
	runRuntime(t, rt)
	link.(interface{ Close() }).Close()

	var problems []string
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		h := rt.Health(ctx)
		cancel()
		problems = h.Problems
		if strings.Contains(strings.Join(problems, "\n"), "postgres unreachable") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("health never said postgres unreachable; problems %q", problems)
		}
		time.Sleep(100 * time.Millisecond)
	}
	text := strings.Join(problems, "\n") + "\n" + strings.Join(logged.all(), "\n")
	if strings.Contains(strings.ToLower(text), "redis") {
		t.Errorf("a runtime on Postgres names Redis:\n%s", text)
	}
	if !strings.Contains(strings.Join(logged.all(), "\n"), "postgres unreachable") {
		t.Errorf("the log does not say postgres unreachable:\n%s", strings.Join(logged.all(), "\n"))
	}
}
