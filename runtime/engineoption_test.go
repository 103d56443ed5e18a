package runtime_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
	"github.com/belfry/belfry/runtime/engine"
)

// Runtimes built with Options.Engine over the Redis engine schedule as
// Options.Redis ones do, beside them on one namespace: each slot runs
// once across all of them, and a manual run through one is recorded.
func TestOptionsEngineSchedulesAsOptionsRedisDoes(t *testing.T) {
	t.Parallel()
	rdb := sharedRedis(t)
	c := &cluster{ns: uniq("ns"), queue: uniq("q"), executed: newExecutions()}
	c.reg = registry.MustNew(registry.Schedule{Name: "every-second", Expr: "* * * * * *", Queue: c.queue, Handler: c.executed.handler})
	for i, opts := range []runtime.Options{
		{Engine: runtime.RedisEngine(rdb)},
		{Engine: runtime.RedisEngine(rdb)},
		{Redis: rdb},
	} {
		opts.Namespace, opts.Replica, opts.LeaseTTL, opts.Logger = c.ns, "r"+string(rune('0'+i)), 2*time.Second, testLogger(t)
		rt, err := runtime.New(c.reg, opts)
		if err != nil {
			t.Fatal(err)
		}
		c.rts = append(c.rts, rt)
	}
	c.startAll(t, rdb)
	waitFor(t, 15*time.Second, "4 per-second slots to run", func() bool {
		return len(c.executed.slots("every-second")) >= 4
	})
	if got := c.leaders(); got != 1 {
		t.Errorf("%d replicas lead, want 1", got)
	}
	// Handed over to whichever replica is next, the slots still run once.
	c.cancels[c.leaderIndex(t)]()
	seen := len(c.executed.slots("every-second"))
	waitFor(t, 15*time.Second, "3 more slots after the handover", func() bool {
		return len(c.executed.slots("every-second")) >= seen+3
	})
	ctx := context.Background()
	occ, err := c.rts[1].Trigger(ctx, "every-second", "engine-option")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the manual run to be recorded", func() bool {
		recs, err := c.rts[0].History(ctx, "every-second", 50)
		for _, r := range recs {
			if r.ID == occ.ID && r.Manual {
				return err == nil
			}
		}
		return false
	})
	c.stopAll()
	assertOncePerSlot(t, c.reg.Schedules()[0], c.executed.slots("every-second"))
}

// otherEngine is an engine that is not the Redis engine.
type otherEngine struct{ engine.Engine }

// Options takes exactly one engine, and a Redis engine serves one runtime.
func TestOptionsEngineIsExclusive(t *testing.T) {
	t.Parallel()
	rdb := sharedRedis(t)
	reg := registry.MustNew(idleSchedule())
	taken := runtime.RedisEngine(rdb)
	rt, err := runtime.New(reg, runtime.Options{Engine: taken, Namespace: uniq("ns")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	for _, tc := range []struct {
		name string
		opts runtime.Options
		want string
	}{
		{"Engine and Redis", runtime.Options{Engine: runtime.RedisEngine(rdb), Redis: rdb}, "exactly one"},
		{"Engine and RedisURL", runtime.Options{Engine: runtime.RedisEngine(rdb), RedisURL: "redis://" + sharedRedisAddr()}, "exactly one"},
		{"a nil client", runtime.Options{Engine: runtime.RedisEngine(nil)}, "nil client"},
		{"an engine serving another runtime", runtime.Options{Engine: taken}, "another runtime"},
		{"another engine", runtime.Options{Engine: otherEngine{}}, "runtime.RedisEngine"},
	} {
		if _, err := runtime.New(reg, tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: New returned %v; want an error saying %q", tc.name, err, tc.want)
		}
	}
}
