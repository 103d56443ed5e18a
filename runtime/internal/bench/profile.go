package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"time"

	"github.com/belfry/belfry/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// cost is where a measured window's time went: Redis's CPU, each command's
// calls and time inside Redis (INFO commandstats, which counts the calls a
// script makes too), and this process's CPU. A step takes one before and
// one after, and reports the difference with BENCH_REDIS_STATS=1, so that
// a target missed says which part to work on.
type cost struct {
	redisCPU, serviceCPU time.Duration
	commands             map[string]commandCost
	// redisWait is how long Redis's main thread waited for a core and how
	// often the kernel took it from it (see coreWait).
	redisWait coreWait
}

type commandCost struct {
	calls int64
	usec  int64
}

func measureCost(ctx context.Context, rdb *redis.Client) (cost, error) {
	c := cost{serviceCPU: processCPU(), commands: map[string]commandCost{}}
	var err error
	if c.redisCPU, err = redisCPU(ctx, rdb); err != nil {
		return c, err
	}
	stats, err := redistest.CommandStats(ctx, rdb)
	if err != nil {
		return c, err
	}
	for name, st := range stats {
		c.commands[name] = commandCost{calls: st.Calls, usec: st.Usec}
	}
	c.redisWait = redisCoreWait(ctx, rdb)
	return c, nil
}

// since is what happened between before and c.
func (c cost) since(before cost) cost {
	d := cost{redisCPU: c.redisCPU - before.redisCPU, serviceCPU: c.serviceCPU - before.serviceCPU, commands: map[string]commandCost{},
		redisWait: coreWait{wait: c.redisWait.wait - before.redisWait.wait, preempted: c.redisWait.preempted - before.redisWait.preempted,
			known: c.redisWait.known && before.redisWait.known}}
	for name, cc := range c.commands {
		b := before.commands[name]
		if cc.calls > b.calls {
			d.commands[name] = commandCost{calls: cc.calls - b.calls, usec: cc.usec - b.usec}
		}
	}
	return d
}

// print writes the cost, commands by their time inside Redis, largest
// first. A script's usec includes the commands it calls, which are also
// listed on their own.
func (c cost) print(w io.Writer, step string) {
	fmt.Fprintf(w, "bench: %s: Redis CPU %.3f s, service CPU %.3f s\n", step, c.redisCPU.Seconds(), c.serviceCPU.Seconds())
	if c.redisWait.known {
		fmt.Fprintf(w, "bench: %s: Redis's main thread waited %.3f s for a core, preempted %d times\n", step,
			c.redisWait.wait.Seconds(), c.redisWait.preempted)
	}
	names := make([]string, 0, len(c.commands))
	for name := range c.commands {
		names = append(names, name)
	}
	slices.SortFunc(names, func(a, b string) int { return int(c.commands[b].usec - c.commands[a].usec) })
	for _, name := range names {
		cc := c.commands[name]
		fmt.Fprintf(w, "bench: %s:   %-10s calls=%-8d %.3f s (%.2f µs a call)\n", step, name, cc.calls,
			float64(cc.usec)/1e6, float64(cc.usec)/float64(cc.calls))
	}
}

// costWatch measures a step's window when BENCH_REDIS_STATS=1, and
// profiles this process's CPU over it into BENCH_CPUPROFILE-<step>.pprof
// when BENCH_CPUPROFILE names a path prefix. Both are off by default: the
// INFO calls and the profiler would cost the step itself.
type costWatch struct {
	step    string
	rdb     *redis.Client
	before  cost
	on      bool
	profile *os.File
}

func watchCost(ctx context.Context, rdb *redis.Client, step string) *costWatch {
	w := &costWatch{step: step, rdb: rdb, on: os.Getenv("BENCH_REDIS_STATS") == "1"}
	if prefix := os.Getenv("BENCH_CPUPROFILE"); prefix != "" {
		if f, err := os.Create(prefix + "-" + step + ".pprof"); err == nil && pprof.StartCPUProfile(f) == nil {
			w.profile = f
		}
	}
	if w.on {
		var err error
		if w.before, err = measureCost(ctx, rdb); err != nil {
			w.on = false
		}
	}
	return w
}

// done ends the window and prints its cost to stderr.
func (w *costWatch) done(ctx context.Context) {
	if w.profile != nil {
		pprof.StopCPUProfile()
		w.profile.Close()
		w.profile = nil
	}
	if !w.on {
		return
	}
	w.on = false
	after, err := measureCost(ctx, w.rdb)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: %s: %v\n", w.step, err)
		return
	}
	after.since(w.before).print(os.Stderr, w.step)
}

// heapCounters are the process's cumulative heap allocations and garbage
// collections: their growth over a window is what the window allocated.
type heapCounters struct{ allocBytes, cycles uint64 }

func readHeapCounters() heapCounters {
	samples := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(samples)
	return heapCounters{allocBytes: samples[0].Value.Uint64(), cycles: samples[1].Value.Uint64()}
}

func (c heapCounters) since(before heapCounters) heapCounters {
	return heapCounters{allocBytes: c.allocBytes - before.allocBytes, cycles: c.cycles - before.cycles}
}
