package runtime_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/belfry/belfry/internal/redistest"
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

// A primary with fewer replicas online than the writes wait for cannot
// acknowledge one; a replica still syncing does not count, nor is a
// replica or an embedded Redis (no role) judged.
func TestJudgeReplicas(t *testing.T) {
	const online = "slave0:ip=127.0.0.1,port=6380,state=online,offset=42,lag=0\r\n"
	const syncing = "slave1:ip=127.0.0.1,port=6381,state=wait_bgsave,offset=0,lag=0\r\n"
	for _, tt := range []struct {
		name, info string
		want       int
		unsafe     bool
	}{
		{"one online, one wanted", "role:master\r\nconnected_slaves:1\r\n" + online, 1, false},
		{"none, one wanted", "role:master\r\nconnected_slaves:0\r\n", 1, true},
		{"one online and one syncing, two wanted", "role:master\r\nconnected_slaves:2\r\n" + online + syncing, 2, true},
		{"none, none wanted", "role:master\r\nconnected_slaves:0\r\n", 0, false},
		{"a replica", "role:slave\r\nmaster_host:127.0.0.1\r\n", 1, false},
		{"no role (an embedded Redis)", "redis_version:7.0.15\r\n", 1, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := runtime.JudgeReplicas(tt.info, tt.want); (err != nil) != tt.unsafe {
				t.Errorf("verdict %v, want unsafe %v", err, tt.unsafe)
			}
		})
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

// On a Sentinel client the leader's writes wait for a replica by default.
// Without one connected the runtime does not lead, and says why in the
// log, health and status; it leads again once the replica is back. A
// runtime that opted out (ReplicaAcksOff) leads without it.
func TestNoLeadingWithoutAReplicaToAcknowledge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := redistest.StartSentinel(t, redistest.SentinelOptions{Sentinels: 1})
	var logs syncBuffer
	rt, err := runtime.New(registry.MustNew(idleSchedule()), runtime.Options{Redis: s.Client(t), Namespace: uniq("ns"),
		LeaseTTL: 2 * time.Second, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	runUntilTheEnd(t, rt)
	waitFor(t, 10*time.Second, "the runtime to lead with its replica", rt.Leadership().Leading)

	s.Servers[1].Kill()
	const why = "the primary has 0 replica(s) online"
	waitFor(t, 10*time.Second, "the runtime to step down and say why", func() bool {
		return !rt.Leadership().Leading() && strings.Contains(logs.String(), "will not schedule on this Redis: too few Redis replicas")
	})
	if h := rt.Health(ctx); h.Status != "unhealthy" || !strings.Contains(strings.Join(h.Problems, ";"), why) {
		t.Errorf("health %+v, want unhealthy saying %q", h, why)
	}
	if snap, _ := rt.Monitor().Snapshot(ctx); !strings.Contains(snap.RedisUnsafe, why) {
		t.Errorf("status's redis_unsafe %q, want it to say %q", snap.RedisUnsafe, why)
	}
	off, err := runtime.New(registry.MustNew(idleSchedule()), runtime.Options{Redis: s.Client(t), Namespace: uniq("ns"),
		LeaseTTL: 2 * time.Second, ReplicaAcks: runtime.ReplicaAcksOff, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	runUntilTheEnd(t, off)
	waitFor(t, 10*time.Second, "a runtime with ReplicaAcksOff to lead without a replica", off.Leadership().Leading)

	s.Servers[1].Start()
	waitFor(t, 20*time.Second, "the runtime to lead once the replica is back", rt.Leadership().Leading)
	if !strings.Contains(logs.String(), "safe again") {
		t.Errorf("no recovery logged:\n%s", logs.String())
	}
}
