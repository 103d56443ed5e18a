package runtime_test

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// cluster is n in-process replicas sharing one Redis, plus one worker.
type cluster struct {
	reg      *registry.Registry
	ns       string
	queue    string
	rts      []*runtime.Runtime
	cancels  []context.CancelFunc
	wg       sync.WaitGroup
	executed *executions
}

func newCluster(t *testing.T, rdb redis.UniversalClient, n int, opts runtime.Options, scheds ...registry.Schedule) *cluster {
	t.Helper()
	c := &cluster{ns: uniq("ns"), queue: uniq("q"), executed: newExecutions()}
	for i := range scheds {
		scheds[i].Queue = c.queue
		if scheds[i].Handler == nil {
			scheds[i].Handler = c.executed.handler
		}
	}
	reg, err := registry.New(scheds...)
	if err != nil {
		t.Fatal(err)
	}
	c.reg = reg
	opts.Redis, opts.Namespace = rdb, c.ns
	opts.LeaseTTL = cmpOr(opts.LeaseTTL, 2*time.Second)
	opts.Logger = testLogger(t)
	for i := range n {
		o := opts
		if o.Replica == "" {
			o.Replica = "r" + string(rune('0'+i))
		}
		rt, err := runtime.New(reg, o)
		if err != nil {
			t.Fatal(err)
		}
		c.rts = append(c.rts, rt)
	}
	c.startAll(t, rdb)
	return c
}

// startAll starts a worker for the queue and every replica, stopped when
// the test ends.
func (c *cluster) startAll(t *testing.T, rdb redis.UniversalClient) {
	startWorker(t, rdb, c.queue, func(mux *asynq.ServeMux) { c.rts[0].RegisterHandlers(mux) })
	for i := range c.rts {
		c.start(i)
	}
	t.Cleanup(c.stopAll)
}

func cmpOr[T comparable](a, b T) T {
	var zero T
	if a != zero {
		return a
	}
	return b
}

func (c *cluster) start(i int) {
	ctx, cancel := context.WithCancel(context.Background())
	c.cancels = append(c.cancels, nil)
	c.cancels[i] = cancel
	c.wg.Go(func() { c.rts[i].Run(ctx) })
}

func (c *cluster) stopAll() {
	for _, cancel := range c.cancels {
		if cancel != nil {
			cancel()
		}
	}
	c.wg.Wait()
	for _, rt := range c.rts {
		rt.Close()
	}
}

// leaderIndex returns the index of the one replica that leads.
func (c *cluster) leaderIndex(t *testing.T) int {
	t.Helper()
	var idx int
	waitFor(t, 10*time.Second, "one leader", func() bool {
		idx = -1
		for i, rt := range c.rts {
			if rt.Leadership().Leading() {
				idx = i
			}
		}
		return idx >= 0 && c.leaders() == 1
	})
	return idx
}

func (c *cluster) leaders() (n int) {
	for _, rt := range c.rts {
		if rt.Leadership().Leading() {
			n++
		}
	}
	return n
}

// assertOncePerSlot checks that every slot between the first and the last
// executed ran exactly once: no duplicate, no gap.
func assertOncePerSlot(t *testing.T, s *registry.Schedule, runs map[int64]int) {
	t.Helper()
	var slots []int64
	for slot, n := range runs {
		if n != 1 {
			t.Errorf("slot %s ran %d times, want 1", time.Unix(slot, 0).UTC().Format(time.RFC3339), n)
		}
		slots = append(slots, slot)
	}
	sort.Slice(slots, func(i, j int) bool { return slots[i] < slots[j] })
	for i := 1; i < len(slots); i++ {
		prev := time.Unix(slots[i-1], 0)
		if want := s.Next(prev); want.Unix() != slots[i] {
			t.Errorf("slot %s never ran (between %s and %s)", want.UTC().Format(time.RFC3339),
				prev.UTC().Format(time.RFC3339), time.Unix(slots[i], 0).UTC().Format(time.RFC3339))
		}
	}
}

func TestReplicasEnqueueEachSlotOnce(t *testing.T) {
	for _, n := range []int{2, 5} {
		t.Run(string(rune('0'+n))+" replicas", func(t *testing.T) {
			t.Parallel()
			rdb := sharedRedis(t)
			c := newCluster(t, rdb, n, runtime.Options{},
				registry.Schedule{Name: "every-second", Expr: "* * * * * *"},
				registry.Schedule{Name: "every-2s", Expr: "*/2 * * * * *"})
			waitFor(t, 15*time.Second, "6 per-second slots to run", func() bool {
				return len(c.executed.slots("every-second")) >= 6
			})
			if got := c.leaders(); got != 1 {
				t.Errorf("%d replicas lead, want 1", got)
			}
			c.stopAll()
			for _, s := range c.reg.Schedules() {
				assertOncePerSlot(t, s, c.executed.slots(s.Name))
			}
		})
	}
}

// Close releases only what the runtime owns: a shared client stays usable,
// a client built from RedisURL is closed, and neither is an error.
func TestCloseLeavesASharedClientOpen(t *testing.T) {
	t.Parallel()
	reg := registry.MustNew(idleSchedule())
	shared := sharedRedis(t)
	rt, err := runtime.New(reg, runtime.Options{Redis: shared, Namespace: uniq("ns"), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Close(); err != nil {
		t.Errorf("Close with a shared client: %v", err)
	}
	if err := shared.Ping(context.Background()).Err(); err != nil {
		t.Errorf("the shared client was closed: %v", err)
	}
	owned, err := runtime.New(reg, runtime.Options{RedisURL: "redis://" + sharedRedisAddr(), Namespace: uniq("ns"), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := owned.Close(); err != nil {
		t.Errorf("Close with its own client: %v", err)
	}
	if err := owned.RedisClient().Ping(context.Background()).Err(); !errors.Is(err, redis.ErrClosed) {
		t.Errorf("after Close, the runtime's own client answers Ping with %v, want redis.ErrClosed", err)
	}
}
func TestSecretsStayOutOfErrors(t *testing.T) {
	for _, url := range []string{
		"redis://user:hunter2@127.0.0.1:6379/x",
		"redis://user:hunt/er2@127.0.0.1:6379/0", // a '/' in the password defeats URL parsing
		"redis://:hunt/er2@127.0.0.1:port/0",
		"redis://user:hunt@er2@127.0.0.1:6379/x",
	} {
		_, err := runtime.New(registry.MustNew(idleSchedule()), runtime.Options{RedisURL: url})
		if err == nil {
			continue // parsed: nothing to leak
		}
		if strings.Contains(err.Error(), "hunt") || strings.Contains(err.Error(), "er2") {
			t.Errorf("RedisURL %q: error %q shows the password", url, err)
		}
	}
}
