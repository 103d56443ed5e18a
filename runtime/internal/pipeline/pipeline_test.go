package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/belfry/belfry/runtime/internal/pipeline"
	"github.com/belfry/belfry/runtime/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// gatePipelines counts the pipelines of EVALSHAs that reach Redis (not
// go-redis's own connection handshakes). The i-th of them, while i is
// below len(gates), reports on entered and waits for gates[i] to close;
// then it panics if i is below panics, else runs.
type gatePipelines struct {
	gates           []chan struct{}
	opens           []func()
	panics          int64
	entered         chan int64
	pipelines, cmds atomic.Int64
}

func newGatePipelines(t *testing.T, gates int) *gatePipelines {
	g := &gatePipelines{entered: make(chan int64, gates)}
	for range gates {
		gate := make(chan struct{})
		open := sync.OnceFunc(func() { close(gate) })
		g.gates, g.opens = append(g.gates, gate), append(g.opens, open)
		t.Cleanup(open)
	}
	return g
}

func (g *gatePipelines) open(i int) { g.opens[i]() }

func (g *gatePipelines) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (g *gatePipelines) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (g *gatePipelines) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if cmds[0].Name() != "evalsha" {
			return next(ctx, cmds)
		}
		g.cmds.Add(int64(len(cmds)))
		i := g.pipelines.Add(1) - 1
		if i < int64(len(g.gates)) {
			g.entered <- i
			<-g.gates[i]
		}
		if i < g.panics {
			panic("hook failure")
		}
		return next(ctx, cmds)
	}
}

// echoScript returns its key and argument, and fails on "bad", so every
// caller can tell its own reply from its neighbours'. Its body is unique
// to the test, and loaded, so EVALSHA finds it.
func echoScript(t *testing.T) *redis.Script {
	script := redis.NewScript(fmt.Sprintf(`-- %s
if ARGV[1] == 'bad' then return redis.error_reply('bad input') end
return KEYS[1] .. '=' .. ARGV[1]`, redistest.Uniq("echo")))
	if err := script.Load(context.Background(), redistest.Shared(t)).Err(); err != nil {
		t.Fatal(err)
	}
	return script
}

func echo(ctx context.Context, script *redis.Script, c redis.Scripter, i int) (string, error) {
	arg := fmt.Sprint(i)
	if i == 7 {
		arg = "bad"
	}
	return script.Run(ctx, c, []string{fmt.Sprintf("k%d", i)}, arg).Text()
}

func wantEcho(t *testing.T, i int, reply string, err error) {
	t.Helper()
	if i == 7 {
		if err == nil || err.Error() != "bad input" {
			t.Errorf("caller 7: err %v, want the script's own error", err)
		}
		return
	}
	if want := fmt.Sprintf("k%d=%d", i, i); err != nil || reply != want {
		t.Errorf("caller %d: %q, %v; want %q", i, reply, err, want)
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
	gate := newGatePipelines(t, 3)
	rdb.AddHook(gate)
	pc := pipeline.NewClient(rdb)
	script := echoScript(t)

	const callers = 102
	replies := make([]string, callers)
	errs := make([]error, callers)
	back := make([]chan struct{}, callers)
	call := func(ctx context.Context, i int) {
		back[i] = make(chan struct{})
		go func() {
			defer close(back[i])
			replies[i], errs[i] = echo(ctx, script, pc, i)
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
	// in a third pipeline, held here.
	gate.open(0)
	gate.open(1)
	within(t, 5*time.Second, "caller 0's return", back[0])
	within(t, 5*time.Second, "caller 1's return", back[1])
	if batch := <-gate.entered; batch != 2 {
		t.Fatalf("pipeline %d entered, want the third", batch)
	}
	gate.open(2)
	for i := range callers {
		<-back[i]
		if i != 9 {
			wantEcho(t, i, replies[i], errs[i])
		}
	}
	// The impatient caller's command was never sent.
	if p, c := gate.pipelines.Load(), gate.cmds.Load(); p != 3 || c != callers-1 {
		t.Errorf("%d pipelines carrying %d commands, want 3 carrying %d", p, c, callers-1)
	}
}

// A hook that panics in a sender (net/http recovers panics in handlers, so
// a trigger's enqueue could do this and the host survive) must not keep a
// sending slot: the queued callers are still served.
func TestPipeliningClientSurvivesAPanickingSender(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: redistest.SharedAddr()})
	t.Cleanup(func() { rdb.Close() })
	gate := newGatePipelines(t, 2)
	gate.panics = 2
	rdb.AddHook(gate)
	pc := pipeline.NewClient(rdb)
	script := echoScript(t)

	var recovered atomic.Int64
	for range 2 {
		go func() {
			defer func() {
				if recover() != nil {
					recovered.Add(1)
				}
			}()
			echo(context.Background(), script, pc, 0)
		}()
		<-gate.entered
	}
	const queued = 4
	replies := make([]string, queued)
	errs := make([]error, queued)
	var wg sync.WaitGroup
	for i := range queued {
		wg.Go(func() { replies[i], errs[i] = echo(context.Background(), script, pc, i+1) })
	}
	redistest.WaitFor(t, 5*time.Second, "4 callers queued", func() bool { return pc.Waiting() == queued })
	gate.open(0)
	gate.open(1)
	served := make(chan struct{})
	go func() { wg.Wait(); close(served) }()
	within(t, 5*time.Second, "serving the queued callers after both senders panicked", served)
	for i := range queued {
		wantEcho(t, i+1, replies[i], errs[i])
	}
	if n := recovered.Load(); n != 2 {
		t.Errorf("%d senders panicked, want 2", n)
	}
}

// A hook that fails a pipeline without running it leaves its commands with
// no reply; each caller must see an error, never a silent success.
type refusePipelines struct{}

func (refusePipelines) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (refusePipelines) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (refusePipelines) ProcessPipelineHook(redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(context.Context, []redis.Cmder) error { return errors.New("circuit open") }
}

func TestPipeliningClientFailsEveryCallItCouldNotSend(t *testing.T) {
	t.Parallel()
	unreachable := redis.NewClient(&redis.Options{Network: "unix", Addr: filepath.Join(t.TempDir(), "none.sock"),
		MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { unreachable.Close() })
	refused := redis.NewClient(&redis.Options{Addr: redistest.SharedAddr()})
	t.Cleanup(func() { refused.Close() })
	refused.AddHook(refusePipelines{})
	for name, rdb := range map[string]redis.UniversalClient{"unreachable": unreachable, "refused by a hook": refused} {
		pc := pipeline.NewClient(rdb)
		script := redis.NewScript("return 1")
		var failed atomic.Int64
		var wg sync.WaitGroup
		for range 20 {
			wg.Go(func() {
				if err := script.Run(context.Background(), pc, []string{"k"}).Err(); err != nil {
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
	gate := newGatePipelines(t, 0)
	rdb.AddHook(gate)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := echo(ctx, echoScript(t), pipeline.NewClient(rdb), 1); !errors.Is(err, context.Canceled) {
		t.Errorf("err %v, want context.Canceled", err)
	}
	if n := gate.pipelines.Load(); n != 0 {
		t.Errorf("%d pipelines sent for a cancelled caller, want 0", n)
	}
}
