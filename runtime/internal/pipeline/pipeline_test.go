package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/belfry/belfry/internal/redistest"
	"github.com/belfry/belfry/runtime/internal/pipeline"
	"github.com/redis/go-redis/v9"
)

// gateScripts counts the enqueue scripts that reach Redis (not go-redis's
// own connection handshakes) and the tasks they carry. The i-th of them,
// while i is below len(gates), reports on entered and waits for gates[i]
// to close; then it panics if i is below panics, else runs.
type gateScripts struct {
	gates          []chan struct{}
	opens          []func()
	panics         int64
	entered        chan int64
	scripts, tasks atomic.Int64
}

func newGateScripts(t *testing.T, gates int) *gateScripts {
	g := &gateScripts{entered: make(chan int64, gates)}
	for range gates {
		gate := make(chan struct{})
		open := sync.OnceFunc(func() { close(gate) })
		g.gates, g.opens = append(g.gates, gate), append(g.opens, open)
		t.Cleanup(open)
	}
	return g
}

func (g *gateScripts) open(i int) { g.opens[i]() }

func (g *gateScripts) DialHook(next redis.DialHook) redis.DialHook { return next }
func (g *gateScripts) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (g *gateScripts) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if cmd.Name() != "eval" || len(args) < 3 {
			return next(ctx, cmd)
		}
		keys, _ := args[2].(int)
		if n, ok := args[3+keys].(int); ok { // ARGV[1], the number of tasks
			g.tasks.Add(int64(n))
		}
		i := g.scripts.Add(1) - 1
		if i < int64(len(g.gates)) {
			g.entered <- i
			<-g.gates[i]
		}
		if i < g.panics {
			panic("hook failure")
		}
		return next(ctx, cmd)
	}
}

// taskOf is caller i's task: every third one's ID is in Redis already, so
// each caller can tell its own reply (a conflict) from its neighbours'.
func taskOf(t *testing.T, rdb redis.UniversalClient, queue string, i int) pipeline.Task {
	task := pipeline.Task{Type: "t", Queue: queue, ID: fmt.Sprint(i)}
	if i%3 == 0 {
		if err := rdb.HSet(context.Background(), pipeline.TaskKey(queue, task.ID), "msg", "earlier").Err(); err != nil {
			t.Fatal(err)
		}
	}
	return task
}

func wantReply(t *testing.T, i int, inserted bool, err error) {
	t.Helper()
	if err != nil || inserted != (i%3 != 0) {
		t.Errorf("caller %d: %v, %v; want inserted %v", i, inserted, err, i%3 != 0)
	}
}

func within(t *testing.T, d time.Duration, what string, done <-chan struct{}) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not happen within %s", what, d)
	}
}

func TestPipeliningClientBatchesConcurrentCallsAndKeepsEachReply(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redistest.SharedAddr()})
	t.Cleanup(func() { rdb.Close() })
	queue := redistest.Uniq("batching")
	t.Cleanup(func() { forget(t, rdb, queue) })
	gate := newGateScripts(t, 3)
	rdb.AddHook(gate)
	pc := pipeline.NewClient(rdb)

	const callers = 102
	inserted := make([]bool, callers)
	errs := make([]error, callers)
	back := make([]chan struct{}, callers)
	call := func(ctx context.Context, i int) {
		back[i] = make(chan struct{})
		task := taskOf(t, rdb, queue, i)
		go func() {
			defer close(back[i])
			inserted[i], errs[i] = pc.Enqueue(ctx, task)
		}()
	}
	// Callers 0 and 1 take the two sending slots and are held; the rest
	// queue behind them.
	call(ctx, 0)
	<-gate.entered
	call(ctx, 1)
	<-gate.entered
	impatient, giveUp := context.WithCancel(ctx)
	for i := 2; i < callers; i++ {
		if i == 9 {
			call(impatient, i)
		} else {
			call(ctx, i)
		}
	}
	redistest.WaitFor(t, 5*time.Second, "100 callers queued", func() bool { return pc.Waiting() == callers-2 })

	// A queued caller whose context ends leaves the queue at once.
	giveUp()
	within(t, 5*time.Second, "the impatient caller's return", back[9])
	if !errors.Is(errs[9], context.Canceled) {
		t.Errorf("impatient caller: %v, want context.Canceled", errs[9])
	}

	// The senders return with their own replies while the queue goes out
	// in a third script, held here.
	gate.open(0)
	gate.open(1)
	within(t, 5*time.Second, "caller 0's return", back[0])
	within(t, 5*time.Second, "caller 1's return", back[1])
	if batch := <-gate.entered; batch != 2 {
		t.Fatalf("script %d entered, want the third", batch)
	}
	gate.open(2)
	for i := range callers {
		<-back[i]
		if i != 9 {
			wantReply(t, i, inserted[i], errs[i])
		}
	}
	// The impatient caller's task was never sent.
	if n, c := gate.scripts.Load(), gate.tasks.Load(); n != 3 || c != callers-1 {
		t.Errorf("%d scripts carrying %d tasks, want 3 carrying %d", n, c, callers-1)
	}
	if pending := rdb.LRange(ctx, "asynq:{"+queue+"}:pending", 0, -1).Val(); slices.Contains(pending, "9") || len(pending) != 68 {
		t.Errorf("pending %q: want the 68 inserted tasks, never the impatient caller's", pending)
	}
}

// A hook that panics in a sender (net/http recovers panics in handlers, so
// a trigger's enqueue could do this and the host survive) must not keep a
// sending slot: the queued callers are still served.
func TestPipeliningClientSurvivesAPanickingSender(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: redistest.SharedAddr()})
	t.Cleanup(func() { rdb.Close() })
	queue := redistest.Uniq("panicking")
	t.Cleanup(func() { forget(t, rdb, queue) })
	gate := newGateScripts(t, 2)
	gate.panics = 2
	rdb.AddHook(gate)
	pc := pipeline.NewClient(rdb)

	var recovered atomic.Int64
	for i := range 2 {
		go func() {
			defer func() {
				if recover() != nil {
					recovered.Add(1)
				}
			}()
			pc.Enqueue(context.Background(), pipeline.Task{Type: "t", Queue: queue, ID: fmt.Sprint("panics-", i)})
		}()
		<-gate.entered
	}
	const queued = 4
	inserted := make([]bool, queued)
	errs := make([]error, queued)
	var wg sync.WaitGroup
	for i := range queued {
		task := taskOf(t, rdb, queue, i+1)
		wg.Go(func() { inserted[i], errs[i] = pc.Enqueue(context.Background(), task) })
	}
	redistest.WaitFor(t, 5*time.Second, "4 callers queued", func() bool { return pc.Waiting() == queued })
	gate.open(0)
	gate.open(1)
	served := make(chan struct{})
	go func() { wg.Wait(); close(served) }()
	within(t, 5*time.Second, "serving the queued callers after both senders panicked", served)
	for i := range queued {
		wantReply(t, i+1, inserted[i], errs[i])
	}
	// A sender hands its slot over on the way out of its panic, so the
	// queued callers may be served before the panic reaches its caller.
	redistest.WaitFor(t, 5*time.Second, "both senders' panics to reach their callers", func() bool {
		return recovered.Load() == 2
	})
}

// A hook that fails a command without running it leaves it with no reply;
// each caller must see an error, never a silent success.
type refuseScripts struct{}

func (refuseScripts) DialHook(next redis.DialHook) redis.DialHook { return next }
func (refuseScripts) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (refuseScripts) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "eval" {
			return errors.New("circuit open")
		}
		return next(ctx, cmd)
	}
}

func TestPipeliningClientFailsEveryCallItCouldNotSend(t *testing.T) {
	t.Parallel()
	unreachable := redis.NewClient(&redis.Options{Network: "unix", Addr: filepath.Join(t.TempDir(), "none.sock"),
		MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { unreachable.Close() })
	refused := redis.NewClient(&redis.Options{Addr: redistest.SharedAddr()})
	t.Cleanup(func() { refused.Close() })
	refused.AddHook(refuseScripts{})
	for name, rdb := range map[string]redis.UniversalClient{"unreachable": unreachable, "refused by a hook": refused} {
		pc := pipeline.NewClient(rdb)
		var failed atomic.Int64
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Go(func() {
				if _, err := pc.Enqueue(context.Background(), pipeline.Task{Type: "t", Queue: "never", ID: fmt.Sprint(i)}); err != nil {
					failed.Add(1)
				}
			})
		}
		wg.Wait()
		if n := failed.Load(); n != 20 {
			t.Errorf("%s: %d of 20 calls failed, want all: a call that reports success never reached Redis", name, n)
		}
	}
}

func TestPipeliningClientDoesNotSendForACancelledCaller(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: redistest.SharedAddr()})
	t.Cleanup(func() { rdb.Close() })
	gate := newGateScripts(t, 0)
	rdb.AddHook(gate)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := pipeline.NewClient(rdb).Enqueue(ctx, pipeline.Task{Type: "t", Queue: "q", ID: "1"}); !errors.Is(err, context.Canceled) {
		t.Errorf("err %v, want context.Canceled", err)
	}
	if n := gate.scripts.Load(); n != 0 {
		t.Errorf("%d scripts sent for a cancelled caller, want 0", n)
	}
}

// A batch of several chunks sends them from goroutines of its own, where a
// panicking hook would take the service down: the chunk's tasks fail, the
// others go in.
func TestAPanicInOneChunkOfABatchFailsItsTasksOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redistest.SharedAddr()})
	t.Cleanup(func() { rdb.Close() })
	queue := redistest.Uniq("chunk-panic")
	t.Cleanup(func() { forget(t, rdb, queue) })
	gate := newGateScripts(t, 0)
	gate.panics = 1 // the first script of the batch
	rdb.AddHook(gate)
	const n = 300 // three chunks
	items := make([]pipeline.Item, n)
	for i := range items {
		items[i] = pipeline.Item{Task: pipeline.Task{Type: "t", Queue: queue, ID: fmt.Sprint(i)}}
	}
	var failed, inserted int
	for _, r := range pipeline.NewClient(rdb).EnqueueAll(ctx, items) {
		switch {
		case r.Err != nil:
			failed++
		case r.Inserted:
			inserted++
		}
	}
	if failed == 0 || failed+inserted != n || inserted == 0 {
		t.Errorf("%d failed, %d inserted of %d; want one chunk failed and the rest in", failed, inserted, n)
	}
	if got := rdb.LLen(ctx, "asynq:{"+queue+"}:pending").Val(); got != int64(inserted) {
		t.Errorf("%d pending, want the %d reported inserted", got, inserted)
	}
}
