package core

import (
	"context"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/internal/clock"
	"github.com/belfry/belfry/runtime/internal/redisengine"
	"github.com/redis/go-redis/v9"
)

// A loss noticed long after it happened is windowed from when this replica
// last saw the store intact, not from when it noticed (the engine's
// remembering it: redisengine's TestAFollowerKeepsLearningAndRemembersTheStoreIntact).
func TestALateFoundLossIsWindowedFromTheStoreLastSeenIntact(t *testing.T) {
	clk := clock.NewStub(time.Date(2026, 11, 29, 3, 0, 0, 0, time.UTC))
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:0"}) // never dialled
	t.Cleanup(func() { rdb.Close() })
	reg := registry.MustNew(registry.Schedule{Name: "tick", Expr: "* * * * * *", Grace: 30 * time.Second,
		Handler: func(ctx context.Context, occ registry.Occurrence) error { return nil }})
	r, err := newRuntime(reg, Options{Engine: redisengine.NewPending(rdb), LeaseTTL: 2 * time.Second, SkewMargin: 4 * time.Second}, clk)
	if err != nil {
		t.Fatal(err)
	}
	intact := clk.Now()
	clk.Advance(time.Minute) // the data went in this minute; only later is it found
	found := clk.Now()
	want := intact.Add(-30*time.Second - 4*time.Second)
	if from := r.lossFrom(found, intact); !from.Equal(want) {
		t.Errorf("a loss found a minute after the store was last seen intact is windowed from %s, want %s (grace and SkewMargin before %s)",
			from.Format(time.TimeOnly), want.Format(time.TimeOnly), intact.Format(time.TimeOnly))
	}
}
