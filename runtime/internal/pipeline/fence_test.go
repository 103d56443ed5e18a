package pipeline_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/belfry/belfry/runtime/internal/pipeline"
	"github.com/belfry/belfry/runtime/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// insertScript stands for asynq's enqueue: insert a key unless it exists.
var insertScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
return 1`)

// A fenced write runs while the lease holds the fence's value, and is
// refused by Redis once it holds another, however late the write arrives
// and whether or not anything else would have stopped it.
func TestFencedScriptsRunOnlyUnderTheirLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Shared(t)
	pc := pipeline.NewClient(rdb)
	lease, task := redistest.Uniq("lease"), redistest.Uniq("task")
	if err := rdb.Set(ctx, lease, "r0|1", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	holder := &pipeline.Fence{Key: lease, Value: "r0|1"}
	n, err := insertScript.Run(pipeline.WithFence(ctx, holder), pc, []string{task + ":a"}, "x").Int()
	if err != nil || n != 1 || holder.Rejected() {
		t.Fatalf("the holder's fenced write: %d %v (rejected %v), want it inserted", n, err, holder.Rejected())
	}
	rdb.Set(ctx, lease, "r1|2", time.Minute) // another replica took over
	_, err = insertScript.Run(pipeline.WithFence(ctx, holder), pc, []string{task + ":b"}, "x").Int()
	if !errors.Is(err, pipeline.ErrFenced) || !holder.Rejected() {
		t.Errorf("the ex-holder's write: %v (rejected %v), want ErrFenced", err, holder.Rejected())
	}
	if n, _ := rdb.Exists(ctx, task+":b").Result(); n != 0 {
		t.Error("Redis ran the ex-holder's write")
	}
	// Unfenced callers (a manual trigger on any replica) are unaffected.
	if n, err := insertScript.Run(ctx, pc, []string{task + ":c"}, "x").Int(); err != nil || n != 1 {
		t.Errorf("an unfenced write: %d %v", n, err)
	}
}

// Many fenced and unfenced callers at once, as in a spike: every call gets
// its own reply, and fenced ones all succeed while the lease is renewed (a
// PEXPIRE aborts a watching EXEC, which is tried again) — here every
// millisecond, thousands of times more often than a holder renews.
func TestFencedBatchesSurviveRenewals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Shared(t)
	pc := pipeline.NewClient(rdb)
	lease, task := redistest.Uniq("lease"), redistest.Uniq("task")
	rdb.Set(ctx, lease, "r0|1", time.Minute)
	fence := &pipeline.Fence{Key: lease, Value: "r0|1"}
	stop := make(chan struct{})
	var renewer sync.WaitGroup
	renewer.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
				rdb.PExpire(ctx, lease, time.Minute)
			}
		}
	})
	const callers = 200
	var wg sync.WaitGroup
	errs := make([]error, callers)
	for i := range callers {
		wg.Go(func() {
			c := ctx
			if i%2 == 0 {
				c = pipeline.WithFence(ctx, fence)
			}
			_, errs[i] = insertScript.Run(c, pc, []string{task + ":" + string(rune('a'+i%26)) + string(rune('a'+i/26))}, "x").Int()
		})
	}
	wg.Wait()
	close(stop)
	renewer.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("caller %d: %v", i, err)
		}
	}
	if fence.Rejected() {
		t.Error("a renewal was taken for a takeover")
	}
}

// After SCRIPT FLUSH (a Redis restart does the same) go-redis falls back
// from EVALSHA to EVAL, which goes to Client.Eval: a fenced EVAL is fenced
// too, and runs for its holder.
func TestTheEvalFallbackIsFenced(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := redistest.StartPrivate(t)
	rdb := srv.Client(t)
	pc := pipeline.NewClient(rdb)
	rdb.Set(ctx, "lease", "r1|2", time.Minute)
	const body = `redis.call('SET', KEYS[1], ARGV[1]) return 1`
	stale := &pipeline.Fence{Key: "lease", Value: "r0|1"}
	if err := pc.Eval(pipeline.WithFence(ctx, stale), body, []string{"task"}, "x").Err(); !errors.Is(err, pipeline.ErrFenced) {
		t.Errorf("a stale holder's EVAL: %v, want ErrFenced", err)
	}
	if n, _ := rdb.Exists(ctx, "task").Result(); n != 0 {
		t.Error("the EVAL ran unfenced")
	}
	holder := &pipeline.Fence{Key: "lease", Value: "r1|2"}
	if n, err := pc.Eval(pipeline.WithFence(ctx, holder), body, []string{"task"}, "x").Int(); err != nil || n != 1 {
		t.Errorf("the holder's EVAL: %d %v", n, err)
	}
	// And the path a script takes after a flush: EVALSHA answers NOSCRIPT,
	// Run falls back to EVAL, fenced.
	rdb.ScriptFlush(ctx)
	if n, err := insertScript.Run(pipeline.WithFence(ctx, holder), pc, []string{"task2"}, "x").Int(); err != nil || n != 1 {
		t.Errorf("the holder's script after SCRIPT FLUSH: %d %v", n, err)
	}
}

// Behind a slow link (replies 200 ms late) the holder renews more often
// than every two round trips: a fence that spends two round trips between
// its WATCH and its EXEC is aborted by every renewal, and the enqueue
// never lands. With WATCH and GET sent together it does.
func TestFencedWritesLandBehindASlowLinkWhileTheLeaseIsRenewed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Shared(t)
	proxy := redistest.NewProxy(t, "tcp", redistest.SharedAddr())
	pc := pipeline.NewClient(proxy.Client(t, redis.Options{}))
	lease, task := redistest.Uniq("lease"), redistest.Uniq("task")
	rdb.Set(ctx, lease, "r0|1", time.Minute)
	if err := insertScript.Load(ctx, rdb).Err(); err != nil {
		t.Fatal(err)
	}
	const latency = 200 * time.Millisecond
	proxy.Delay(latency)
	stop := make(chan struct{})
	var renewer sync.WaitGroup
	renewer.Go(func() {
		tick := time.NewTicker(latency * 19 / 10)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				rdb.PExpire(ctx, lease, time.Minute)
			}
		}
	})
	defer func() { close(stop); renewer.Wait() }()
	fence := &pipeline.Fence{Key: lease, Value: "r0|1"}
	for i := range 3 {
		n, err := insertScript.Run(pipeline.WithFence(ctx, fence), pc, []string{task + ":" + string(rune('a'+i))}, "x").Int()
		if err != nil || n != 1 {
			t.Fatalf("fenced write %d behind a slow link: %d %v, want it inserted", i, n, err)
		}
	}
}
