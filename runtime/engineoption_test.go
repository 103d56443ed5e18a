package runtime_test

import (
	"context"
	"iter"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
	"github.com/belfry/belfry/runtime/core"
	"github.com/belfry/belfry/runtime/engine"
	"github.com/belfry/belfry/runtime/internal/redisengine"
	"github.com/redis/go-redis/v9"
)

// Runtimes built with Options.Engine over the Redis engine, and by
// core.New with it, schedule as Options.Redis ones do, beside them on one
// namespace: each slot runs once across all of them, and a manual run
// through one is recorded. (The conformance suite builds its replicas
// with runtime.New.)
func TestOptionsEngineSchedulesAsOptionsRedisDoes(t *testing.T) {
	t.Parallel()
	rdb := sharedRedis(t)
	runOnePerSlot(t, rdb, uniq("ns"), []replicaOptions{
		{Options: runtime.Options{Engine: runtime.RedisEngine(rdb)}},
		{Options: runtime.Options{Engine: runtime.RedisEngine(rdb)}, throughCore: true},
		{Options: runtime.Options{Redis: rdb}},
	})
}

// replicaOptions are one replica's of runOnePerSlot: built by runtime.New,
// or with throughCore by core.New on the Options' Engine (and wired to
// asynq's workers by runtime.FromCore).
type replicaOptions struct {
	runtime.Options
	throughCore bool
}

func (o replicaOptions) build(reg *registry.Registry) (*runtime.Runtime, error) {
	if !o.throughCore {
		return runtime.New(reg, o.Options)
	}
	opts := core.Options{Engine: o.Engine}
	copyCoreOptions(&opts, o.Options)
	rt, err := core.New(reg, opts)
	if err != nil {
		return nil, err
	}
	return runtime.FromCore(rt), nil
}

// foreignEngine hides the Redis engine's type: the runtime runs it as it
// would any engine, with none of the Redis compensations, its core alone.
type foreignEngine struct{ engine.Engine }

// The core keeps each slot once through an engine it knows only by
// package engine's interface: the fencing and enqueue-if-absent of the
// contract carry exactly once across a handover, with the Redis engine
// (real Redis beneath) in an unknown type.
func TestTheCoreRunsOnAnyEngine(t *testing.T) {
	t.Parallel()
	rdb := sharedRedis(t)
	ns := uniq("ns")
	var opts []replicaOptions
	for i := range 2 {
		eng := redisengine.New(redisengine.Config{Client: rdb, Namespace: ns, HistoryLimit: runtime.HistoryLimitDefault,
			RecordTTL: time.Hour, Replica: "r" + string(rune('0'+i)), LeaseTTL: 2 * time.Second, Log: testLogger(t)})
		opts = append(opts, replicaOptions{Options: runtime.Options{Engine: foreignEngine{eng}}})
	}
	runOnePerSlot(t, rdb, ns, opts)
}

// runOnePerSlot runs a per-second schedule on replicas built with opts,
// hands the lease over once and triggers a manual run, and checks that
// every slot ran once and the manual run was recorded.
func runOnePerSlot(t *testing.T, rdb redis.UniversalClient, ns string, opts []replicaOptions) {
	c := &cluster{ns: ns, queue: uniq("q"), executed: newExecutions()}
	c.reg = registry.MustNew(registry.Schedule{Name: "every-second", Expr: "* * * * * *", Queue: c.queue, Handler: c.executed.handler})
	for i, o := range opts {
		o.Namespace, o.Replica, o.LeaseTTL, o.Logger = c.ns, "r"+string(rune('0'+i)), 2*time.Second, testLogger(t)
		rt, err := o.build(c.reg)
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
	} {
		if _, err := runtime.New(reg, tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: New returned %v; want an error saying %q", tc.name, err, tc.want)
		}
	}
}

// A runtime.RedisEngine that no New has configured answers a call made
// on it with an error that says so, and New refuses one held inside
// another engine, where New cannot configure it, instead of running into
// it unconfigured.
func TestOptionsEngineRedisEngineUnconfiguredSaysSo(t *testing.T) {
	t.Parallel()
	rdb := sharedRedis(t)
	const unconfigured = "must be passed to runtime.New before use"
	direct := runtime.RedisEngine(rdb)
	if _, err := direct.Time(context.Background()); err == nil || !strings.Contains(err.Error(), unconfigured) {
		t.Errorf("Time on a RedisEngine no New configured: %v; want an error saying it %s", err, unconfigured)
	}
	if _, leading := direct.Current(); leading {
		t.Error("a RedisEngine no New configured says it leads")
	}
	reg := registry.MustNew(idleSchedule())
	for _, tc := range []struct {
		name string
		eng  func() engine.Engine
	}{
		{"embedded", func() engine.Engine { return foreignEngine{runtime.RedisEngine(rdb)} }},
		{"a wrapper of a wrapper, by pointer", func() engine.Engine { return &foreignEngine{foreignEngine{runtime.RedisEngine(rdb)}} }},
		{"in a named field", func() engine.Engine { return &countingEngine{Engine: foreignEngine{}, inner: runtime.RedisEngine(rdb)} }},
	} {
		const want = "holds an engine.Configurable"
		for newName, err := range newWithEngine(reg, tc.eng) {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s with a RedisEngine %s: %v; want an error saying Options.Engine %s", newName, tc.name, err, want)
			}
		}
	}
}

// newWithEngine builds a runtime on a fresh engine from eng through each
// entry point, runtime.New and core.New, and yields each one's error.
func newWithEngine(reg *registry.Registry, eng func() engine.Engine) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		rt, err := runtime.New(reg, runtime.Options{Engine: eng(), Namespace: uniq("ns")})
		if err == nil {
			rt.Close()
		}
		if !yield("runtime.New", err) {
			return
		}
		crt, err := core.New(reg, core.Options{Engine: eng(), Namespace: uniq("ns")})
		if err == nil {
			crt.Close()
		}
		yield("core.New", err)
	}
}

// Both entry points refuse a RedisEngine's client the engine cannot lead
// on, with the same error: none. (A cluster client is taken: see
// TestRuntimeRunsOnRedisCluster.)
func TestRedisEngineRefusesItsClientThroughEitherNew(t *testing.T) {
	t.Parallel()
	reg := registry.MustNew(idleSchedule())
	for newName, err := range newWithEngine(reg, func() engine.Engine { return runtime.RedisEngine(nil) }) {
		if want := "Options.Engine: runtime.RedisEngine was given a nil client"; err == nil || err.Error() != want {
			t.Errorf("%s with RedisEngine(nil): %v; want %q", newName, err, want)
		}
	}
}

// countingEngine holds the engine it instruments in a field of its own.
type countingEngine struct {
	engine.Engine
	inner engine.Engine
}

// New refusing a RedisEngine's client leaves the engine free: asked
// again, New names the fault again rather than a runtime it never served.
func TestOptionsEngineRefusedRedisEngineStaysFree(t *testing.T) {
	t.Parallel()
	eng := runtime.RedisEngine(nil)
	reg := registry.MustNew(idleSchedule())
	for attempt := 1; attempt <= 2; attempt++ {
		rt, err := runtime.New(reg, runtime.Options{Engine: eng, Namespace: uniq("ns")})
		if err == nil {
			rt.Close()
		}
		if err == nil || !strings.Contains(err.Error(), "nil client") {
			t.Errorf("New, attempt %d, with a RedisEngine on a nil client: %v; want it refused for its nil client", attempt, err)
		}
	}
}

// Of runtimes built at once from one RedisEngine, exactly one takes it.
func TestOptionsEngineRedisEngineServesOneOfConcurrentNews(t *testing.T) {
	t.Parallel()
	rdb := sharedRedis(t)
	reg := registry.MustNew(idleSchedule())
	eng := runtime.RedisEngine(rdb)
	const news = 8
	var wg sync.WaitGroup
	runtimes := make([]*runtime.Runtime, news)
	errs := make([]error, news)
	start := make(chan struct{})
	for i := range news {
		wg.Go(func() {
			<-start
			runtimes[i], errs[i] = runtime.New(reg, runtime.Options{Engine: eng, Namespace: uniq("ns")})
		})
	}
	close(start)
	wg.Wait()
	built := 0
	for i, rt := range runtimes {
		switch {
		case errs[i] == nil:
			built++
			rt.Close()
		case !strings.Contains(errs[i].Error(), "another runtime"):
			t.Errorf("New %d: %v; want it built or refused as serving another runtime", i, errs[i])
		}
	}
	if built != 1 {
		t.Errorf("%d of %d concurrent News took one RedisEngine, want 1", built, news)
	}
}
