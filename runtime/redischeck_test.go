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
	"github.com/belfry/belfry/runtime/internal/clock"
	"github.com/belfry/belfry/runtime/internal/store"
)

func TestJudgeRedis(t *testing.T) {
	for _, tt := range []struct {
		name, info string
		unsafe     string // "" for safe
	}{
		{"current and noeviction", "# Server\r\nredis_version:7.0.15\r\n# Memory\r\nmaxmemory_policy:noeviction\r\n", ""},
		{"evicts", "redis_version:7.2.4\r\nmaxmemory:1073741824\r\nmaxmemory_policy:allkeys-lru\r\n", "maxmemory-policy is allkeys-lru"},
		{"an eviction policy without a memory limit", "redis_version:7.2.4\r\nmaxmemory:0\r\nmaxmemory_policy:allkeys-lru\r\n", ""},
		{"evicts by TTL", "redis_version:7.2.4\r\nmaxmemory_policy:volatile-ttl\r\n", "maxmemory-policy is volatile-ttl"},
		{"too old", "redis_version:6.0.16\r\nmaxmemory_policy:noeviction\r\n", "Redis 6.0.16 is older than 6.2.0"},
		{"old enough", "redis_version:6.2.0\r\nmaxmemory_policy:noeviction\r\n", ""},
		{"a minor above ten", "redis_version:6.10.1\r\n", ""},
		{"reports neither (an embedded Redis)", "# Clients\r\nconnected_clients:1\r\n", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := runtime.JudgeRedis(tt.info)
			switch {
			case tt.unsafe == "" && err != nil:
				t.Errorf("judged unsafe: %v", err)
			case tt.unsafe != "" && (!errors.Is(err, runtime.ErrUnsafeRedis) || !strings.Contains(err.Error(), tt.unsafe)):
				t.Errorf("verdict %v, want ErrUnsafeRedis saying %q", err, tt.unsafe)
			}
		})
	}
	if err := runtime.JudgeRedis("redis_version:7.0.15\r\ncluster_enabled:1\r\n"); !errors.Is(err, runtime.ErrRedisCluster) {
		t.Errorf("a cluster node: verdict %v, want ErrRedisCluster", err)
	}
	if err := runtime.JudgeRedis("redis_version:7.0.15\r\ncluster_enabled:0\r\n"); err != nil {
		t.Errorf("cluster_enabled:0: verdict %v, want none", err)
	}
}

// A Redis that evicts keys could drop the lease, the token and the cursors:
// the runtime refuses to lead on it, says so once and in its health, leads
// once it is fixed, and gives the lease up if it turns unsafe again.
func TestNoLeadingOnARedisThatEvicts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := startPrivateRedis(t)
	rdb := srv.Client(t)
	if err := rdb.ConfigSet(ctx, "maxmemory", "1gb").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err(); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	reg := registry.MustNew(idleSchedule())
	rt, err := runtime.New(reg, runtime.Options{Redis: rdb, Namespace: uniq("ns"), LeaseTTL: time.Second,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	rt.JudgeRedisSettingsEvery(0)
	runUntilTheEnd(t, rt)
	lease := store.NewKeys(rt.Namespace()).Lease
	waitFor(t, 5*time.Second, "the refusal", func() bool { return strings.Contains(logs.String(), "will not schedule on this Redis") })
	if n, _ := rdb.Exists(ctx, lease).Result(); n != 0 || rt.Leadership().Leading() {
		t.Fatal("the runtime took the lease on a Redis that evicts")
	}
	if h := rt.Health(ctx); h.Status != "unhealthy" || !strings.Contains(strings.Join(h.Problems, ";"), "maxmemory-policy is allkeys-lru") {
		t.Errorf("health %+v, want unhealthy naming the eviction policy", h)
	}
	if err := rdb.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the runtime to lead once Redis is safe", rt.Leadership().Leading)
	if !strings.Contains(logs.String(), "safe again") {
		t.Errorf("no recovery logged:\n%s", logs.String())
	}
	if err := rdb.ConfigSet(ctx, "maxmemory-policy", "volatile-ttl").Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the holder to give the lease up", func() bool {
		n, _ := rdb.Exists(ctx, lease).Result()
		return !rt.Leadership().Leading() && n == 0
	})
	if n := strings.Count(logs.String(), "will not schedule on this Redis"); n != 2 {
		t.Errorf("logged the refusal %d times, want once per verdict (2):\n%s", n, logs.String())
	}
}

// A replica whose clock is further from Redis's than SkewMargin does not
// lead (it would run slots early or late) and says so; one within the
// margin leads and reports its measured skew.
func TestAReplicaWithASkewedClockDoesNotLead(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		offset time.Duration
		leads  bool
	}{{5 * time.Minute, false}, {-5 * time.Minute, false}, {10 * time.Second, true}} {
		t.Run(tt.offset.String(), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			rdb := sharedRedis(t)
			var logs syncBuffer
			rt, err := runtime.NewWithClock(registry.MustNew(idleSchedule()), runtime.Options{Redis: rdb, Namespace: uniq("ns"),
				LeaseTTL: time.Second, SkewMargin: time.Minute, Logger: slog.New(slog.NewTextHandler(&logs, nil))}, clock.Offset(tt.offset))
			if err != nil {
				t.Fatal(err)
			}
			runUntilTheEnd(t, rt)
			waitFor(t, 5*time.Second, "the skew to be measured", func() bool { _, ok := rt.Redis().ClockSkew(); return ok })
			skew, _ := rt.Redis().ClockSkew()
			if d := skew - tt.offset; d > time.Second || d < -time.Second {
				t.Errorf("measured skew %s, want about %s", skew, tt.offset)
			}
			if tt.leads {
				waitFor(t, 5*time.Second, "the replica to lead", rt.Leadership().Leading)
				return
			}
			waitFor(t, 5*time.Second, "the refusal", func() bool { return strings.Contains(logs.String(), "clock is") })
			if rt.Leadership().Leading() || !strings.Contains(rt.Redis().Unsafe(), "more than SkewMargin") {
				t.Errorf("leader %v, unsafe %q; want no lead and the skew named", rt.Leadership().Leading(), rt.Redis().Unsafe())
			}
			if h := rt.Health(ctx); h.Status != "unhealthy" {
				t.Errorf("health %+v, want unhealthy", h)
			}
		})
	}
}
