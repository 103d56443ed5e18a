package runtime_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
	"github.com/belfry/belfry/runtime/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// Until belfry's keys are hash-tagged, a Redis Cluster is refused plainly:
// New refuses a cluster client, and a runtime that meets a cluster anyway
// (a plain client of one node, a proxy in front of a cluster) reports a
// configuration error once and does not lead, instead of flapping between
// "unreachable" and "reachable again" with health saying Redis is up.
func TestRedisClusterIsRefused(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cluster := redistest.StartCluster(t, 3)
	reg := registry.MustNew(idleSchedule())

	t.Run("New refuses a cluster client", func(t *testing.T) {
		universal := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: cluster.Addrs()})
		defer universal.Close()
		for name, client := range map[string]redis.UniversalClient{"NewClusterClient": cluster.Client(t), "NewUniversalClient": universal} {
			rt, err := runtime.New(reg, runtime.Options{Redis: client, Namespace: uniq("ns")})
			if !errors.Is(err, runtime.ErrRedisCluster) {
				if rt != nil {
					rt.Close()
				}
				t.Fatalf("New with a %s: %v; want ErrRedisCluster", name, err)
			}
			for _, want := range []string{"not hash-tagged", "single primary", "Sentinel"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("New with a %s: %q; want it to say %q", name, err, want)
				}
			}
		}
	})

	t.Run("a plain client of a cluster node", func(t *testing.T) {
		node := redis.NewClient(&redis.Options{Addr: cluster.Addrs()[0]})
		defer node.Close()
		var logs syncBuffer
		rt, err := runtime.New(reg, runtime.Options{Redis: node, Namespace: uniq("ns"), LeaseTTL: time.Second,
			Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		runUntilTheEnd(t, rt)
		waitFor(t, 10*time.Second, "the refusal", func() bool { return strings.Contains(logs.String(), "will not schedule on this Redis") })
		// A few lease periods: a flapping runtime logs again in each.
		deadline := time.Now().Add(3 * time.Second)
		waitFor(t, 5*time.Second, "three lease periods", func() bool { return time.Now().After(deadline) })
		assertClusterRefused(t, ctx, rt, logs.String())
	})

	t.Run("a CROSSSLOT reply", func(t *testing.T) {
		// A proxy in front of a cluster may answer INFO as a plain server;
		// what gives the cluster away is its refusal of a command.
		node := redis.NewClient(&redis.Options{Addr: cluster.Addrs()[0]})
		defer node.Close()
		crossSlot := node.MGet(ctx, "a", "b").Err()
		if crossSlot == nil || !strings.HasPrefix(crossSlot.Error(), "CROSSSLOT") {
			t.Fatalf("MGET a b on a cluster node: %v; want CROSSSLOT", crossSlot)
		}
		var logs syncBuffer
		rt, err := runtime.New(reg, runtime.Options{Redis: sharedRedis(t), Namespace: uniq("ns"),
			Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		defer rt.Close()
		for range 3 {
			rt.NoteRedis(crossSlot)
		}
		if !strings.Contains(rt.Redis().Unsafe(), "CROSSSLOT") {
			t.Errorf("RedisUnsafe %q; want it to quote the CROSSSLOT reply", rt.Redis().Unsafe())
		}
		assertClusterRefused(t, ctx, rt, logs.String())
	})
}

// assertClusterRefused checks what a runtime that met a cluster says: one
// log line, no "unreachable", Redis up, no lease, and health naming the
// configuration error.
func assertClusterRefused(t *testing.T, ctx context.Context, rt *runtime.Runtime, logs string) {
	t.Helper()
	if n := strings.Count(logs, "will not schedule on this Redis"); n != 1 || !strings.Contains(logs, "configuration error") {
		t.Errorf("the refusal logged %d times, want once, as a configuration error:\n%s", n, logs)
	}
	if strings.Contains(logs, "unreachable") || strings.Contains(logs, "reachable again") {
		t.Errorf("a cluster taken for an outage:\n%s", logs)
	}
	if state, err := rt.Redis().State(); state != runtime.RedisUp {
		t.Errorf("Redis %s (%v); want up: it answers, and refuses", state, err)
	}
	if rt.Leadership().Leading() {
		t.Error("the runtime leads on a Redis Cluster")
	}
	h := rt.Health(ctx)
	problems := strings.Join(h.Problems, "; ")
	if h.Status != "unhealthy" || !strings.Contains(problems, "configuration error: belfry does not run on Redis Cluster yet") ||
		!strings.Contains(problems, "Sentinel") || strings.Contains(problems, "unreachable") {
		t.Errorf("health %+v; want unhealthy, naming the configuration error and what to use", h)
	}
}
