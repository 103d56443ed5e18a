package core

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/belfry/belfry/internal/redistest"
	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/internal/clock"
	"github.com/belfry/belfry/runtime/internal/redisengine"
)

// A replica whose clock runs ahead (it may resume without leading) ends
// the pause window at Redis's time, not in the future: the leader must not
// record the slots due after the resume paused.
func TestAPauseWindowEndsWhenRedisSawTheResume(t *testing.T) {
	ctx := context.Background()
	ahead := clock.NewStub(time.Now().Add(time.Hour))
	r, err := newRuntime(registry.MustNew(registry.Schedule{Name: "tick", Expr: "* * * * * *", Queue: redistest.Uniq("q"),
		Handler: func(context.Context, registry.Occurrence) error { return nil }}),
		Options{Engine: redisengine.NewPending(redistest.Shared(t)), Namespace: redistest.Uniq("internal"), Replica: "r0",
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, ahead)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Pause(ctx, "tick", "maintenance"); err != nil {
		t.Fatal(err)
	}
	if err := r.Resume(ctx, "tick"); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	_, windows, err := r.redisEngine().PauseStates(ctx, []string{"tick"})
	if err != nil {
		t.Fatal(err)
	}
	if len(windows[0]) != 1 || time.UnixMilli(windows[0][0].To).After(resumed) {
		t.Errorf("windows %+v, want one ending by %s, when Redis resumed it", windows[0], resumed.UTC())
	}
}
