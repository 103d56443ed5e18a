package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/core"
	"github.com/belfry/belfry/runtime/internal/clock"
	"github.com/belfry/belfry/runtime/internal/corehook"
	"github.com/belfry/belfry/runtime/postgres"
)

// A replica compares its clock with Postgres's before it leads: one
// further off than SkewMargin does not lead, and its health says why; one
// within it leads. Both report the skew they measured.
func TestClockSkewAgainstPostgres(t *testing.T) {
	t.Parallel()
	db := migratedDB(t)
	reg := registry.MustNew(registry.Schedule{Name: "tick", Expr: "* * * * * *",
		Handler: func(context.Context, registry.Occurrence) error { return nil }})
	start := func(ns string, offset time.Duration) *core.Runtime {
		t.Helper()
		eng, err := postgres.New(postgres.Config{Pool: db})
		if err != nil {
			t.Fatal(err)
		}
		built, err := corehook.NewWithClock(reg, core.Options{Engine: eng, Namespace: ns, Replica: "solo",
			LeaseTTL: 2 * time.Second, SkewMargin: 2 * time.Second, Logger: quietLogger()}, clock.Offset(offset))
		if err != nil {
			t.Fatal(err)
		}
		rt := built.(*core.Runtime)
		runRuntime(t, rt)
		return rt
	}
	skewed := start("skewed", 3*time.Second)
	near := start("near", -time.Second)

	waitUntil(t, 15*time.Second, "the replica within SkewMargin to lead", near.Leadership().Leading)
	if skew, ok := near.Diagnostics().ClockSkew(); !ok || skew > -500*time.Millisecond || skew < -1500*time.Millisecond {
		t.Errorf("ClockSkew of the replica 1 s behind Postgres = %s, %v; want about -1s", skew, ok)
	}
	waitUntil(t, 15*time.Second, "the skewed replica to measure its skew", func() bool {
		_, ok := skewed.Diagnostics().ClockSkew()
		return ok
	})
	if skew, _ := skewed.Diagnostics().ClockSkew(); skew < 2500*time.Millisecond || skew > 3500*time.Millisecond {
		t.Errorf("ClockSkew of the replica 3 s ahead of Postgres = %s; want about 3s", skew)
	}
	unsafe := skewed.Diagnostics().Unsafe()
	if !strings.Contains(unsafe, core.ErrClockSkew.Error()) || !strings.Contains(unsafe, "off Postgres's") {
		t.Errorf("Unsafe of the replica 3 s off Postgres = %q; want the clock skew against Postgres", unsafe)
	}
	h := skewed.Health(context.Background())
	if !strings.Contains(strings.Join(h.Problems, "; "), "off Postgres's") {
		t.Errorf("health of the skewed replica = %+v; want its clock skew among its problems", h)
	}
	// It stays out of leadership while the skew lasts: a few of its
	// election's turns (each a third of the lease TTL).
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if skewed.Leadership().Leading() {
			t.Fatal("the replica 3 s off Postgres, beyond SkewMargin, leads")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
