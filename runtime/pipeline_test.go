package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/belfry/belfry/runtime"
	"github.com/redis/go-redis/v9"
)

// holdPipelines counts the pipelines of EVALSHAs that reach Redis (not
// go-redis's own connection handshakes) and holds the first `held` of them
// until release is closed.
type holdPipelines struct {
	held             int64
	release, entered chan struct{}
	pipelines, cmds  atomic.Int64
}

func (h *holdPipelines) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *holdPipelines) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *holdPipelines) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if cmds[0].Name() != "evalsha" {
			return next(ctx, cmds)
		}
		h.cmds.Add(int64(len(cmds)))
		if h.pipelines.Add(1) <= h.held {
			h.entered <- struct{}{}
			<-h.release
		}
		return next(ctx, cmds)
	}
}

func TestPipeliningClientBatchesConcurrentCallsAndKeepsEachReply(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: sharedRedisAddr()})
	t.Cleanup(func() { rdb.Close() })
	hold := &holdPipelines{held: 2, release: make(chan struct{}), entered: make(chan struct{}, 2)}
	release := sync.OnceFunc(func() { close(hold.release) })
	t.Cleanup(release)
	rdb.AddHook(hold)
	pc := runtime.NewPipeliningClient(rdb)

	// The script echoes its key and argument, and fails on "bad", so every
	// caller can tell its own reply from its neighbours'.
	script := redis.NewScript(fmt.Sprintf(`-- %s
if ARGV[1] == 'bad' then return redis.error_reply('bad input') end
return KEYS[1] .. '=' .. ARGV[1]`, uniq("echo")))
	if err := script.Load(ctx, sharedRedis(t)).Err(); err != nil {
		t.Fatal(err)
	}
	const callers = 102
	replies := make([]string, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	run := func(i int, ctx context.Context) {
		arg := fmt.Sprint(i)
		if i == 7 {
			arg = "bad"
		}
		replies[i], errs[i] = script.Run(ctx, pc, []string{fmt.Sprintf("k%d", i)}, arg).Text()
	}
	call := func(i int, ctx context.Context) { wg.Go(func() { run(i, ctx) }) }
	// The first two callers each send a pipeline, which the hook holds;
	// the rest line up behind them.
	call(0, ctx)
	<-hold.entered
	call(1, ctx)
	<-hold.entered
	impatient, giveUp := context.WithCancel(ctx)
	impatientBack := make(chan struct{})
	go func() { run(9, impatient); close(impatientBack) }()
	for i := 2; i < callers; i++ {
		if i != 9 {
			call(i, ctx)
		}
	}
	waitFor(t, 5*time.Second, "100 callers waiting", func() bool { return runtime.PipelineWaiting(pc) == callers-2 })

	// A waiting caller whose context ends returns at once, pipelines held.
	giveUp()
	select {
	case <-impatientBack:
		if !errors.Is(errs[9], context.Canceled) {
			t.Errorf("impatient caller: %v, want context.Canceled", errs[9])
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a waiting caller whose context ended did not return")
	}
	release()
	wg.Wait()

	for i := range callers {
		switch i {
		case 7:
			if errs[i] == nil || errs[i].Error() != "bad input" {
				t.Errorf("caller 7: err %v, want the script's own error", errs[i])
			}
		case 9:
		default:
			if want := fmt.Sprintf("k%d=%d", i, i); errs[i] != nil || replies[i] != want {
				t.Errorf("caller %d: %q, %v; want %q", i, replies[i], errs[i], want)
			}
		}
	}
	// Two held pipelines of one, then the 100 waiting in one more: the
	// first sender to come back takes them all.
	if p, c := hold.pipelines.Load(), hold.cmds.Load(); p != 3 || c != callers {
		t.Errorf("%d pipelines carrying %d commands, want 3 carrying %d", p, c, callers)
	}
}

func TestPipeliningClientFailsEveryCallWhenRedisIsUnreachable(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Network: "unix", Addr: filepath.Join(t.TempDir(), "none.sock"),
		MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { rdb.Close() })
	pc := runtime.NewPipeliningClient(rdb)
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
		t.Errorf("%d of 20 calls failed, want all: a call that reports success never reached Redis", n)
	}
}
