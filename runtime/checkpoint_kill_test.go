package runtime_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
	"github.com/belfry/belfry/runtime/checkpoint"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// The worker process of TestCheckpointedRunSurvivesSIGKILLAndSIGTERMOnRedis.
const (
	envKillWorkerNS    = "BELFRY_CHECKPOINT_WORKER_NS"
	envKillWorkerQueue = "BELFRY_CHECKPOINT_WORKER_QUEUE"
	killItems          = 10_000
	killBatch          = 50
)

// killRegistry is the schedule the worker runs and the test triggers: a
// checkpointed run over killItems items, each batch counting its items
// in the hash <ns>:test:items in one transaction, after a moment's work.
func killRegistry(rdb redis.UniversalClient, ns, queue string) *registry.Registry {
	key := ns + ":test:items"
	handler := func(ctx context.Context, occ registry.Occurrence) error {
		return checkpoint.Run(ctx, func(ctx context.Context, cursor string) (string, bool, error) {
			from, _ := strconv.Atoi(cursor)
			to := min(from+killBatch, killItems)
			select {
			case <-time.After(10 * time.Millisecond):
			case <-ctx.Done():
				return "", false, ctx.Err()
			}
			_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
				for i := from; i < to; i++ {
					p.HIncrBy(ctx, key, strconv.Itoa(i), 1)
				}
				return nil
			})
			checkpoint.Add(ctx, int64(to-from))
			return strconv.Itoa(to), to == killItems, err
		})
	}
	return registry.MustNew(registry.Schedule{Name: "long", Expr: "17 3 * * *", Queue: queue, Timeout: time.Minute,
		MaxRetry: 3, Handler: handler})
}

// TestCheckpointWorkerProcessRedis is the body of a worker process; run
// directly it skips.
func TestCheckpointWorkerProcessRedis(t *testing.T) {
	ns := os.Getenv(envKillWorkerNS)
	if ns == "" {
		t.Skip("worker process of TestCheckpointedRunSurvivesSIGKILLAndSIGTERMOnRedis; runs only when that test starts it")
	}
	queue := os.Getenv(envKillWorkerQueue)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	rdb := redis.NewClient(&redis.Options{Addr: sharedRedisAddr()})
	defer rdb.Close()
	rt, err := runtime.New(killRegistry(rdb, ns, queue), runtime.Options{Redis: rdb, Namespace: ns, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{Queues: map[string]int{queue: 1}, Concurrency: 1,
		TaskCheckInterval: 20 * time.Millisecond, ShutdownTimeout: time.Second, Logger: quietAsynq{}, LogLevel: asynq.FatalLevel,
		RetryDelayFunc: func(int, error, *asynq.Task) time.Duration { return time.Millisecond }, DelayedTaskCheckInterval: 50 * time.Millisecond})
	mux := asynq.NewServeMux()
	rt.RegisterHandlers(mux)
	if err := srv.Start(mux); err != nil {
		t.Fatal(err)
	}
	<-ctx.Done()
	// A deploy: asynq cancels the running task after ShutdownTimeout and
	// puts it back; Close waits for the handler to save its place.
	srv.Shutdown()
	rt.Close()
}

// A checkpointed run of 10,000 items on Redis survives a worker's SIGKILL
// (asynq recovers the task once its lease has expired; the retry resumes
// from the last saved batch) and a worker's SIGTERM (saved, continued,
// finished): every item is processed, and at most one batch twice.
func TestCheckpointedRunSurvivesSIGKILLAndSIGTERMOnRedis(t *testing.T) {
	if !*longFlag {
		t.Skip("asynq recovers a killed worker's task a minute after its lease: run with -long (make test/long)")
	}
	t.Parallel()
	ctx := context.Background()
	rdb := sharedRedis(t)
	ns, queue := uniq("ns"), uniq("q")
	rt, err := runtime.New(killRegistry(rdb, ns, queue), runtime.Options{Redis: rdb, Namespace: ns, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	startWorker := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCheckpointWorkerProcessRedis$", "-test.count=1")
		cmd.Env = append(os.Environ(), envKillWorkerNS+"="+ns, envKillWorkerQueue+"="+queue)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	counts := func() (done, twice, most int) {
		m, err := rdb.HGetAll(ctx, ns+":test:items").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range m {
			n, _ := strconv.Atoi(v)
			done++
			if n > 1 {
				twice++
			}
			most = max(most, n)
		}
		return done, twice, most
	}
	atLeast := func(n int, within time.Duration, what string) {
		t.Helper()
		waitFor(t, within, what, func() bool { done, _, _ := counts(); return done >= n })
	}
	first := startWorker()
	occ, err := rt.Trigger(ctx, "long", "")
	if err != nil {
		t.Fatal(err)
	}
	atLeast(2000, 30*time.Second, "2,000 items before the SIGKILL")
	first.Process.Signal(syscall.SIGKILL)
	first.Wait()
	atKill, _, _ := counts()
	// asynq's recoverer takes a task whose lease expired more than 30 s
	// ago; a worker's recoverer runs when it starts.
	waitFor(t, 90*time.Second, "the killed worker's lease to be recoverable", func() bool {
		cutoff := strconv.FormatInt(time.Now().Add(-31*time.Second).Unix(), 10)
		n, err := rdb.ZCount(ctx, "asynq:{"+queue+"}:lease", "-inf", "("+cutoff).Result()
		return err == nil && n > 0
	})
	second := startWorker()
	atLeast(atKill+2000, 30*time.Second, "2,000 more items after the SIGKILL")
	second.Process.Signal(syscall.SIGTERM)
	if err := second.Wait(); err != nil {
		t.Errorf("the SIGTERMed worker: %v", err)
	}
	waitFor(t, 10*time.Second, "the interruption recorded", func() bool {
		return lastRecord(t, rt, occ.ID).Outcome == runtime.OutcomeContinued
	})
	if done, _, _ := counts(); done == killItems {
		t.Fatal("the run finished before the SIGTERM; the test proves nothing")
	}
	startWorker()
	waitFor(t, 30*time.Second, "the occurrence recorded succeeded", func() bool {
		return lastRecord(t, rt, occ.ID).Outcome == runtime.OutcomeSucceeded
	})
	done, twice, most := counts()
	if done != killItems || twice > killBatch || most > 2 {
		t.Errorf("%d items processed, %d of them twice, one %d times; want all %d, at most one batch (%d) twice",
			done, twice, most, killItems, killBatch)
	}
	rec := lastRecord(t, rt, occ.ID)
	if p := rec.Progress; p == nil || !p.Done || p.Resumptions < 2 {
		t.Errorf("progress %+v; want done with at least 2 resumptions (the recovery, the SIGTERM)", p)
	}
	t.Logf("items twice %d (batch %d), progress %+v, attempt %d", twice, killBatch, rec.Progress, rec.Attempt)
}
