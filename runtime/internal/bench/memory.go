package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/belfry/belfry/runtime/internal/store"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// memoryRun is what one run of per-second schedules left in Redis.
type memoryRun struct {
	schedules      int
	perSchedule    float64 // bytes: used_memory at steady state minus before, per schedule
	tasks, records float64 // asynq task hashes and ledger records per schedule
	taskBytes      float64 // bytes per schedule in asynq's keys of the queue (MEMORY USAGE)
	ledgerBytes    float64 // bytes per schedule in the namespace's keys (MEMORY USAGE)
	archived       float64 // of tasks: archived (dead) tasks per schedule
}

// benchMemory runs per-second schedules with real workers for a couple of
// minutes and measures Redis's memory at steady state: first schedules
// whose handler succeeds (the headline), then failing ones with retry=3,
// whose tasks asynq retries and archives and whose late retries must not
// leave ledger records behind.
func benchMemory(addr string, s settings, r *results) error {
	var err error
	if r.memOK, err = memoryTrial(addr, "ok", s.memSchedules, s.memWarmup, s.memWindow, nil); err != nil {
		return err
	}
	fail := func(context.Context, registry.Occurrence) error { return errors.New("always fails") }
	r.memFailing, err = memoryTrial(addr, "failing", s.memFailing, s.memFailWarmup, s.memWindow, fail)
	return err
}

func memoryTrial(addr, kind string, n int, warmup, window time.Duration, handler registry.HandlerFunc) (memoryRun, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns, queue := "bench-mem-"+kind, "bench-mem-"+kind
	if handler == nil {
		handler = func(context.Context, registry.Occurrence) error { return nil }
	}
	scheds := make([]registry.Schedule, n)
	for i := range scheds {
		scheds[i] = registry.Schedule{Name: fmt.Sprintf("every-second-%03d", i), Expr: "* * * * * *", Queue: queue,
			MaxRetry: 3, Handler: handler}
	}
	reg, err := registry.New(scheds...)
	if err != nil {
		return memoryRun{}, err
	}
	// A one-schedule run first puts in place what does not grow with the
	// schedules (asynq's server and queue keys, the lease, the scripts), so
	// that the baseline taken after it leaves only what the schedules cost.
	warm := registry.MustNew(registry.Schedule{Name: "warm-up", Expr: "* * * * * *", Queue: queue, Handler: handler})
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	newRT := func(reg *registry.Registry) (*runtime.Runtime, error) {
		return runtime.New(reg, runtime.Options{Redis: rdb, Namespace: ns, Logger: quietLogger()})
	}
	warmRT, err := newRT(warm)
	if err != nil {
		return memoryRun{}, err
	}
	rt, err := newRT(reg)
	if err != nil {
		return memoryRun{}, err
	}
	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{Queues: map[string]int{queue: 1}, Concurrency: 20,
		LogLevel: asynq.FatalLevel})
	mux := asynq.NewServeMux()
	warmRT.RegisterHandlers(mux)
	rt.RegisterHandlers(mux)
	if err := srv.Start(mux); err != nil {
		return memoryRun{}, err
	}
	defer srv.Shutdown()
	warmCtx, stopWarm := context.WithTimeout(ctx, 3*time.Second)
	warmRT.Run(warmCtx)
	stopWarm()
	warmRT.Close()
	time.Sleep(time.Second) // its last task runs
	before, err := usedMemory(ctx, rdb)
	if err != nil {
		return memoryRun{}, err
	}
	done := make(chan struct{})
	go func() { rt.Run(ctx); close(done) }()
	defer func() { cancel(); <-done; rt.Close() }()
	time.Sleep(warmup)
	var samples []int64
	for end := time.Now().Add(window); time.Now().Before(end); time.Sleep(window / 12) {
		m, err := usedMemory(ctx, rdb)
		if err != nil {
			return memoryRun{}, err
		}
		samples = append(samples, m-before)
	}
	slices.Sort(samples)
	run := memoryRun{schedules: n, perSchedule: float64(samples[len(samples)/2]) / float64(n)}
	tasks, taskBytes, err := keysUsage(ctx, rdb, "asynq:{"+queue+"}:*", "asynq:{"+queue+"}:t:")
	if err != nil {
		return memoryRun{}, err
	}
	records, ledgerBytes, err := keysUsage(ctx, rdb, store.KeyPrefix(ns)+"*", store.KeyPrefix(ns)+"occ:")
	if err != nil {
		return memoryRun{}, err
	}
	archived, err := rdb.ZCard(ctx, "asynq:{"+queue+"}:archived").Result()
	if err != nil {
		return memoryRun{}, err
	}
	f := float64(n)
	run.tasks, run.taskBytes, run.records, run.ledgerBytes = float64(tasks)/f, float64(taskBytes)/f, float64(records)/f, float64(ledgerBytes)/f
	run.archived = float64(archived) / f
	return run, nil
}

// usedMemory is INFO memory's used_memory less the clients' buffers
// (mem_clients_normal): what the data costs, not the connections of the
// workers and the runtime, which do not grow with the schedules.
func usedMemory(ctx context.Context, rdb *redis.Client) (int64, error) {
	info, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		return 0, err
	}
	fields := map[string]int64{}
	for _, line := range strings.Split(info, "\n") {
		name, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if n, err := strconv.ParseInt(v, 10, 64); ok && err == nil {
			fields[name] = n
		}
	}
	used, ok := fields["used_memory"]
	clients, ok2 := fields["mem_clients_normal"]
	if !ok || !ok2 {
		return 0, errors.New("INFO memory has no used_memory or mem_clients_normal")
	}
	return used - clients, nil
}

// keysUsage sums MEMORY USAGE over the keys matching pattern, and counts
// those starting with counted.
func keysUsage(ctx context.Context, rdb *redis.Client, pattern, counted string) (n, bytes int64, err error) {
	iter := rdb.Scan(ctx, 0, pattern, 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return 0, 0, err
	}
	for start := 0; start < len(keys); start += 1000 {
		part := keys[start:min(start+1000, len(keys))]
		cmds := make([]*redis.IntCmd, len(part))
		if _, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, k := range part {
				cmds[i] = p.MemoryUsage(ctx, k)
			}
			return nil
		}); err != nil && !errors.Is(err, redis.Nil) {
			return 0, 0, err
		}
		for i, c := range cmds {
			bytes += c.Val()
			if strings.HasPrefix(part[i], counted) {
				n++
			}
		}
	}
	return n, bytes, nil
}
