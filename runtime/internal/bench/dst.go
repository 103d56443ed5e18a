package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
	"github.com/belfry/belfry/runtime/internal/clock"
	"github.com/belfry/belfry/runtime/internal/knob"
	"github.com/redis/go-redis/v9"
)

// fallBack is New York's 2026 fall-back: at 06:00 UTC its wall clock goes
// from 01:59:59 EDT back to 01:00:00 EST, and every second of the hour
// after happens twice, each a slot of a wildcard schedule.
var fallBack = time.Date(2026, 11, 1, 6, 0, 0, 0, time.UTC)

// benchDST runs per-second schedules in America/New_York across a
// fall-back, placed there with an offset clock (the runtime's internal
// knob; the public API has none), and times each enqueue against its slot
// on that clock. Next near a transition once walked wall seconds one at a
// time, and 3,000 such schedules fell behind their slots.
func benchDST(addr string, s settings, r *results) error {
	newWithClock, ok := knob.NewWithClock.(func(*registry.Registry, runtime.Options, clock.Clock) (*runtime.Runtime, error))
	if !ok {
		return errors.New("the runtime's clock knob is not set")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const ns, queue = "bench-dst", "bench-dst"
	// BENCH_DST_ZONE=UTC runs the same instants in UTC, for comparison.
	zone := cmp.Or(os.Getenv("BENCH_DST_ZONE"), "America/New_York")
	scheds := make([]registry.Schedule, s.dstSchedules)
	for i := range scheds {
		scheds[i] = registry.Schedule{Name: fmt.Sprintf("every-second-%04d", i), Expr: "* * * * * *",
			Zone: zone, Queue: queue, Handler: func(context.Context, registry.Occurrence) error { return nil }}
	}
	reg, err := registry.New(scheds...)
	if err != nil {
		return err
	}
	// The run starts lead before the transition, on a whole second of
	// the shifted clock, so the slots keep their phase against real time.
	offset := fallBack.Add(-s.dstLead).Sub(time.Now().Truncate(time.Second))
	var mu sync.Mutex
	var lags []time.Duration
	// Each slot's first and last enqueue after it: how long a slot
	// waits to start and how long its enqueues take, slot by slot.
	slots := map[int64]*[2]time.Duration{}
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 32})
	defer rdb.Close()
	rdb.AddHook(newEnqueueHook(queue, func(e enqueueEvent) {
		slot := slotOf(e.taskID)
		lag := e.at.Add(offset).Sub(slot)
		mu.Lock()
		lags = append(lags, lag)
		if span := slots[slot.Unix()]; span == nil {
			slots[slot.Unix()] = &[2]time.Duration{lag, lag}
		} else {
			span[0], span[1] = min(span[0], lag), max(span[1], lag)
		}
		mu.Unlock()
	}))
	// Redis's clock stays where it is: SkewMargin is widened past the
	// offset, or the replica would rightly refuse to lead on a clock that
	// far off Redis's. Nothing else here depends on it.
	skew := max(offset, -offset) + time.Minute
	rt, err := newWithClock(reg, runtime.Options{Redis: rdb, Namespace: ns, SkewMargin: skew, Logger: quietLogger()}, clock.Offset(offset))
	if err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { rt.Run(ctx); close(done) }()
	time.Sleep(s.dstLead / 2)
	watch := watchCost(ctx, rdb, "dst") // the run's steady state, not its takeover
	mu.Lock()
	enqueuedBefore := len(lags)
	mu.Unlock()
	heapBefore, windowStart := readHeapCounters(), time.Now()
	time.Sleep(s.dstLead/2 + s.dstAfter)
	heapUse, window := readHeapCounters().since(heapBefore), time.Since(windowStart)
	mu.Lock()
	enqueuedInWindow := len(lags) - enqueuedBefore
	mu.Unlock()
	watch.done(ctx)
	cancel()
	<-done
	rt.Close()
	mu.Lock()
	defer mu.Unlock()
	if len(lags) == 0 {
		return errors.New("nothing was enqueued")
	}
	// Every second across the transition had its slot.
	from, to := fallBack.Add(-s.dstLead/2), fallBack.Add(s.dstAfter/2)
	var firsts, lasts []time.Duration
	for t := from; t.Before(to); t = t.Add(time.Second) {
		span := slots[t.Unix()]
		if span == nil {
			return fmt.Errorf("no enqueue for the slot %s", t.Format(time.RFC3339))
		}
		firsts, lasts = append(firsts, span[0]), append(lasts, span[1])
	}
	r.dstSchedules, r.dstOccurrences = s.dstSchedules, len(lags)
	r.dstP50, r.dstP99 = percentile(lags, 50), percentile(lags, 99)
	r.dstFirstP50, r.dstLastP50, r.dstLastP90 = percentile(firsts, 50), percentile(lasts, 50), percentile(lasts, 90)
	if enqueuedInWindow > 0 {
		r.dstAllocPerEnqueue = float64(heapUse.allocBytes) / float64(enqueuedInWindow)
	}
	r.dstGCPerSlot = float64(heapUse.cycles) / window.Seconds()
	// The pending tasks (no worker runs them) would only fill Redis.
	return dropKeys(context.Background(), rdb, "asynq:{"+queue+"}:*")
}
