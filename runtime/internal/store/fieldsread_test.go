package store_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/belfry/belfry/internal/redistest"
	"github.com/belfry/belfry/runtime/internal/store"
	"github.com/redis/go-redis/v9"
)

// keyedCalls records each command a client sends as "name key".
type keyedCalls struct {
	mu    sync.Mutex
	calls map[string]int
}

func (k *keyedCalls) note(cmd redis.Cmder) {
	args := cmd.Args()
	key := ""
	if len(args) > 1 {
		key, _ = args[1].(string)
	}
	k.mu.Lock()
	k.calls[cmd.Name()+" "+key]++
	k.mu.Unlock()
}

func (k *keyedCalls) DialHook(next redis.DialHook) redis.DialHook { return next }
func (k *keyedCalls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		k.note(cmd)
		return next(ctx, cmd)
	}
}
func (k *keyedCalls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			k.note(cmd)
		}
		return next(ctx, cmds)
	}
}

// A list of many schedules reads each problem hash the cheaper way: a
// small one (a listpack, walked from its start for every field an HMGET
// asks for) whole, in one HSCAN step, an empty one too; a large one, a
// hash table, by the names' fields. At 100,000 schedules the HMGETs
// of 250 names from the 500-field hashes of paused and running schedules
// walked a listpack once a name, 800 of them a list.
func TestScheduleDataReadsEachProblemHashTheCheaperWay(t *testing.T) {
	t.Parallel()
	rdb := redistest.StartPrivate(t).Client(t).(*redis.Client)
	s := store.New(rdb, redistest.Uniq("problems"), 3, 0)
	ctx := context.Background()
	const schedules = 3000
	names := make([]string, schedules)
	p := rdb.Pipeline()
	for i := range names {
		names[i] = fmt.Sprintf("job-%04d", i)
		switch {
		case i%10 == 0: // 300 paused: a listpack
			p.HSet(ctx, s.Keys.Paused, names[i], fmt.Sprintf(`{"reason":"r%d","at":%d}`, i, i))
		case i%2 == 1: // 1,500 failing: a hash table, past a listpack's size
			p.HSet(ctx, s.Keys.Failing(), names[i], 1000+i)
		}
	}
	if _, err := p.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{s.Keys.Paused: "listpack", s.Keys.Failing(): "hashtable"} {
		if enc := rdb.ObjectEncoding(ctx, key).Val(); enc != want {
			t.Fatalf("%s is a %s; the test needs a %s", key, enc, want)
		}
	}
	calls := &keyedCalls{calls: map[string]int{}}
	rdb.AddHook(calls)
	data, err := s.ScheduleData(ctx, names, 0, []string{"enqueued"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range data {
		paused, failing := i%10 == 0, i%2 == 1 && i%10 != 0
		if (d.Pause != nil) != paused || paused && d.Pause.Reason != "r"+strconv.Itoa(i) {
			t.Errorf("%s: pause %+v; want paused %v", names[i], d.Pause, paused)
		}
		if want := int64(0); failing {
			want = int64(1000 + i)
			if d.FailingSince != want {
				t.Errorf("%s: failing since %d, want %d", names[i], d.FailingSince, want)
			}
		} else if d.FailingSince != want || d.Active != "" {
			t.Errorf("%s: failing since %d, active %q; want neither", names[i], d.FailingSince, d.Active)
		}
	}
	chunks := (schedules + store.Chunk - 1) / store.Chunk
	wantCalls(t, "a read of its own", calls, map[string]int{
		"hmget " + s.Keys.Paused:    0,
		"hscan " + s.Keys.Paused:    1,
		"hmget " + s.Keys.Failing(): chunks,
		"hscan " + s.Keys.Failing(): 0,
		"hmget " + s.Keys.Active():  0,
		"hscan " + s.Keys.Active():  1,
	})

	// A read of many parts reads the hashes once (Problems) and passes
	// them to each part, which then reads none of them.
	problems, err := s.Problems(ctx)
	if err != nil {
		t.Fatal(err)
	}
	clear(calls.calls)
	again, err := s.ScheduleData(ctx, names, 0, []string{"enqueued"}, &problems)
	if err != nil {
		t.Fatal(err)
	}
	for i := range again {
		if a, b := again[i], data[i]; (a.Pause == nil) != (b.Pause == nil) || a.Pause != nil && *a.Pause != *b.Pause ||
			a.FailingSince != b.FailingSince || a.Active != b.Active {
			t.Errorf("%s: with the problems known %+v, read by the part %+v", names[i], a, b)
		}
	}
	known := map[string]int{}
	for _, key := range []string{s.Keys.Paused, s.Keys.Failing(), s.Keys.Active()} {
		for _, c := range []string{"hlen ", "hmget ", "hscan "} {
			known[c+key] = 0
		}
	}
	wantCalls(t, "a part with the problems known", calls, known)
}

// wantCalls fails the test for each call whose count is not what want says.
func wantCalls(t *testing.T, what string, calls *keyedCalls, want map[string]int) {
	t.Helper()
	calls.mu.Lock()
	defer calls.mu.Unlock()
	for call, n := range want {
		if got := calls.calls[call]; got != n {
			t.Errorf("%s: %d calls of %s, want %d; all calls: %v", what, got, call, n, calls.calls)
		}
	}
}
