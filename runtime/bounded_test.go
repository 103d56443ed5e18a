package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
	"github.com/redis/go-redis/v9"
)

// The runtime's own reads return by their deadline on a client the service
// built without ContextTimeoutEnabled (go-redis's default: a command waits
// out its 5 s read timeout whatever the context), each with ErrRedisSlow,
// and a stall is reported as Redis being slow, not down.
func TestTheRuntimesReadsObeyTheirDeadlinesOnAServiceClient(t *testing.T) {
	t.Parallel()
	srv := startPrivateRedis(t)
	// The defaults a service would use, but for the pool: a read given up
	// on holds its connection until the stall ends, and once a default
	// pool (10 a core) were full, any read would give up at its deadline
	// waiting for a connection, hiding one that ignores it.
	rdb := redis.NewClient(&redis.Options{Network: "unix", Addr: srv.Socket, PoolSize: 100})
	t.Cleanup(func() { rdb.Close() })
	family := registry.Schedule{Name: "reports", Expr: "0 9 * * MON", Per: "tenant",
		Handler: func(context.Context, registry.Occurrence) error { return nil }}
	reg := registry.MustNew(idleSchedule(), family)
	rt, err := runtime.New(reg, runtime.Options{Redis: rdb, Namespace: uniq("bounded"), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Monitor().Snapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	acme := runtime.Member{Key: "acme"}
	if _, err := rt.Families().Set(context.Background(), "reports", acme); err != nil {
		t.Fatal(err)
	}
	const bound = 300 * time.Millisecond
	reads := []struct {
		name string
		do   func(context.Context) error
	}{
		{"Monitor.Snapshot", func(ctx context.Context) error { _, err := rt.Monitor().Snapshot(ctx); return err }},
		{"History", func(ctx context.Context) error { _, err := rt.History(ctx, "nightly", 10); return err }},
		{"Orphans", func(ctx context.Context) error { _, err := rt.Orphans(ctx); return err }},
		{"Monitor.Statuses", func(ctx context.Context) error { _, err := rt.Monitor().Statuses(ctx); return err }},
		{"Monitor.LastTimes", func(ctx context.Context) error { _, err := rt.Monitor().LastTimes(ctx); return err }},
		{"Monitor.Counters", func(ctx context.Context) error { _, err := rt.Monitor().Counters(ctx); return err }},
		{"Paused", func(ctx context.Context) error { _, err := rt.Paused(ctx); return err }},
		{"Monitor.Cluster", func(ctx context.Context) error { _, err := rt.Monitor().Cluster(ctx); return err }},
		{"Redis.LostWrites", func(ctx context.Context) error { _, err := rt.Redis().LostWrites(ctx); return err }},
		{"Redis.Misrouted", func(ctx context.Context) error { _, err := rt.Redis().Misrouted(ctx); return err }},
		// A family's reads, which the admin makes for each family it lists.
		{"Families.Count", func(ctx context.Context) error { _, err := rt.Families().Count(ctx, "reports"); return err }},
		{"Families.Next", func(ctx context.Context) error { _, err := rt.Families().Next(ctx, "reports"); return err }},
		{"Families.Get", func(ctx context.Context) error { _, err := rt.Families().Get(ctx, "reports", "acme"); return err }},
		{"Families.List", func(ctx context.Context) error { _, _, err := rt.Families().List(ctx, "reports", "", 10); return err }},
		{"Families.Infos", func(ctx context.Context) error {
			_, err := rt.Families().Infos(ctx, "reports", []runtime.Member{acme})
			return err
		}},
		{"Families.History", func(ctx context.Context) error {
			_, err := rt.Families().History(ctx, "reports", "acme", 10)
			return err
		}},
	}
	// The reads run side by side, so that the stall outlasts them all and
	// the health check after, however slow the machine.
	srv.Stall(t, 6*time.Second)
	type result struct {
		err  error
		took time.Duration
	}
	results := make([]result, len(reads))
	var wg sync.WaitGroup
	for i, read := range reads {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), bound)
			defer cancel()
			start := time.Now()
			err := read.do(ctx)
			results[i] = result{err, time.Since(start)}
		})
	}
	wg.Wait()
	for i, read := range reads {
		if r := results[i]; !errors.Is(r.err, runtime.ErrRedisSlow) {
			t.Errorf("%s during a stall: %v, want ErrRedisSlow", read.name, r.err)
		} else if r.took > bound+500*time.Millisecond {
			t.Errorf("%s with a %s deadline took %s during a stall", read.name, bound, r.took.Round(time.Millisecond))
		}
	}
	state, err := rt.Redis().State()
	if state != runtime.RedisSlow {
		t.Errorf("Redis during a stall is %q (%v), want %q", state, err, runtime.RedisSlow)
	}
	rec := httptest.NewRecorder()
	start := time.Now()
	rt.HealthHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("healthz took %s during a stall; its reads are bounded at 2s", took.Round(time.Millisecond))
	}
	if body := rec.Body.String(); rec.Code != 503 || !strings.Contains(body, `"redis":"slow"`) || !strings.Contains(body, "not answering in time") {
		t.Errorf("healthz during a stall: %d %s, want 503 with redis slow", rec.Code, body)
	}
	var health struct {
		Problems []string `json:"problems"`
	}
	json.Unmarshal(rec.Body.Bytes(), &health)
	for _, p := range health.Problems {
		if strings.Contains(p, "not answering in time") && strings.Count(strings.ToLower(p), "redis") != 1 {
			t.Errorf("healthz problem %q names Redis more than once", p)
		}
	}
}

// A Redis silent for longer than a lease TTL is down, and health's problem
// says why once: "redis unreachable: no answer for 2 s", not the name of
// the outage a second time in front of its cause.
func TestHealthNamesASilentRedisUnreachableOnce(t *testing.T) {
	t.Parallel()
	srv := startPrivateRedis(t)
	rdb := redis.NewClient(&redis.Options{Network: "unix", Addr: srv.Socket, PoolSize: 100})
	t.Cleanup(func() { rdb.Close() })
	rt, err := runtime.New(registry.MustNew(idleSchedule()), runtime.Options{Redis: rdb, Namespace: uniq("silent"), LeaseTTL: time.Second, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	if _, err := rt.Monitor().Snapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Long enough for a health check to find Redis silent past the lease
	// after its own reads gave up, however slow the machine.
	srv.Stall(t, 6*time.Second)
	var health struct {
		Redis    string   `json:"redis"`
		Problems []string `json:"problems"`
	}
	var body string
	waitFor(t, 5*time.Second, "health to report Redis down", func() bool {
		rec := httptest.NewRecorder()
		rt.HealthHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
		body = rec.Body.String()
		return json.Unmarshal(rec.Body.Bytes(), &health) == nil && health.Redis == string(runtime.RedisDown)
	})
	i := slices.IndexFunc(health.Problems, func(p string) bool { return strings.Contains(p, "unreachable") })
	if i < 0 {
		t.Fatalf("healthz with Redis down names no problem unreachable: %s", body)
	}
	if p := health.Problems[i]; strings.Count(p, "unreachable") != 1 || !strings.Contains(p, "no answer") {
		t.Errorf("healthz problem %q, want it to say unreachable once and why (no answer)", p)
	}
}

// A client the runtime makes from RedisURL honours context deadlines.
func TestARedisURLClientHonoursDeadlines(t *testing.T) {
	t.Parallel()
	srv := startPrivateRedis(t)
	rt, err := runtime.New(registry.MustNew(idleSchedule()), runtime.Options{RedisURL: "unix://" + srv.Socket, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	if err := rt.RedisClient().Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	srv.Stall(t, 5*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = rt.RedisClient().Get(ctx, "anything").Err()
	if took := time.Since(start); err == nil || took > time.Second {
		t.Errorf("a GET with a 200ms deadline on the runtime's own client during a stall: %v after %s", err, took.Round(time.Millisecond))
	}
}

// A Redis the replica never authenticates to (a wrong password from the
// start) is an outage health reports, not "ok" with nothing to do.
func TestHealthReportsARedisItCannotAuthenticateTo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := startPrivateRedis(t)
	admin := srv.Client(t)
	if err := admin.ConfigSet(ctx, "requirepass", "right").Err(); err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Network: "unix", Addr: srv.Socket, Password: "wrong"})
	t.Cleanup(func() { rdb.Close() })
	rt, err := runtime.New(registry.MustNew(idleSchedule()), runtime.Options{Redis: rdb, LeaseTTL: time.Second, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	runUntilTheEnd(t, rt)
	waitFor(t, 5*time.Second, "the runtime to find Redis refusing it", func() bool {
		state, _ := rt.Redis().State()
		return state == runtime.RedisDown
	})
	rec := httptest.NewRecorder()
	rt.HealthHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
	if body := rec.Body.String(); rec.Code != 503 || !strings.Contains(body, `"redis":"down"`) || !strings.Contains(body, "WRONGPASS") {
		t.Errorf("healthz with a wrong password: %d %s, want 503 with redis down and the reason", rec.Code, body)
	}
}
