package store_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/belfry/belfry/internal/redistest"
	"github.com/belfry/belfry/runtime/internal/store"
	"github.com/redis/go-redis/v9"
)

// pausedNames reads names' pause states through s and returns the paused
// ones and the ones with windows.
func pausedNames(t *testing.T, s *store.Store, names []string) (paused, windowed []string) {
	t.Helper()
	pauses, windows, err := s.PauseStates(context.Background(), names)
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range names {
		if pauses[i] != nil {
			paused = append(paused, name)
		}
		if len(windows[i]) > 0 {
			windowed = append(windowed, name)
		}
	}
	return paused, windowed
}

func wantPaused(t *testing.T, step string, s *store.Store, names, paused, windowed []string) {
	t.Helper()
	gotPaused, gotWindowed := pausedNames(t, s, names)
	if !slices.Equal(gotPaused, paused) || !slices.Equal(gotWindowed, windowed) {
		t.Fatalf("after %s: paused %v with windows %v, want %v and %v", step, gotPaused, gotWindowed, paused, windowed)
	}
}

// The leader's copy of the pause hashes follows every write of them: its
// own, another replica's, a write of a release that does not set the
// version, and a loss of Redis's data that leaves the hashes as long as
// they were.
func TestPauseStatesFollowEveryWriteOfThePauses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Shared(t)
	ns := redistest.Uniq("pausecache")
	leader, other := store.New(rdb, ns, 10, time.Hour), store.New(redistest.Shared(t), ns, 10, time.Hour)
	names := []string{"a", "b", "c"}
	wantPaused(t, "nothing", leader, names, nil, nil)
	if err := other.SetPause(ctx, "b", store.Pause{Reason: "x", At: time.Now().UnixMilli()}); err != nil {
		t.Fatal(err)
	}
	wantPaused(t, "another replica's pause", leader, names, []string{"b"}, nil)
	if _, err := other.ClearPause(ctx, "b", time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	wantPaused(t, "its resume", leader, names, nil, []string{"b"})
	// An older release writes the hash and no version.
	if err := rdb.HSet(ctx, leader.Keys.Paused, "c", `{"reason":"old","at":1}`).Err(); err != nil {
		t.Fatal(err)
	}
	wantPaused(t, "an older release's pause", leader, names, []string{"c"}, []string{"b"})
	if err := rdb.HDel(ctx, leader.Keys.Paused, "c").Err(); err != nil {
		t.Fatal(err)
	}
	wantPaused(t, "an older release's resume", leader, names, nil, []string{"b"})
	if err := leader.SetPause(ctx, "a", store.Pause{Reason: "x", At: 1}); err != nil {
		t.Fatal(err)
	}
	wantPaused(t, "its own pause", leader, names, []string{"a"}, []string{"b"})
	// a resumes and pauses again, then, between two reads, a resumes and
	// b pauses: as many pauses and windows as before, other ones.
	resume := func(name string) error { _, err := other.ClearPause(ctx, name, time.Now().UnixMilli()); return err }
	pause := func(name string) error { return other.SetPause(ctx, name, store.Pause{Reason: "again", At: 2}) }
	for _, err := range []error{resume("a"), pause("a")} {
		if err != nil {
			t.Fatal(err)
		}
	}
	wantPaused(t, "a resume and a pause of a", leader, names, []string{"a"}, []string{"a", "b"})
	for _, err := range []error{resume("a"), pause("b")} {
		if err != nil {
			t.Fatal(err)
		}
	}
	wantPaused(t, "a's resume and b's pause", leader, names, []string{"b"}, []string{"a", "b"})
	if _, err := other.Forget(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	wantPaused(t, "forgetting b", leader, names, nil, []string{"a"})
	if err := leader.SetPause(ctx, "a", store.Pause{Reason: "x", At: 4}); err != nil {
		t.Fatal(err)
	}
	wantPaused(t, "a's pause again", leader, names, []string{"a"}, []string{"a"})
	// Redis loses its data, and as many pauses and windows are written
	// again, none of them the same: the hashes' lengths are the copy's.
	if err := rdb.Del(ctx, leader.Keys.Paused, leader.Keys.Resumed, leader.Keys.PauseVersion).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HSet(ctx, leader.Keys.Paused, "c", `{"reason":"after the loss","at":2}`).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HSet(ctx, leader.Keys.Resumed, "c", "1 2").Err(); err != nil {
		t.Fatal(err)
	}
	wantPaused(t, "a loss and other pauses", leader, names, []string{"c"}, []string{"c"})
	// An older release paused c with no version, and Redis had an epoch;
	// Redis loses its data, and an older release pauses a: the version is
	// as absent as before and the lengths the same, the epoch is not.
	if err := rdb.Set(ctx, leader.Keys.Epoch, "epoch-1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Del(ctx, leader.Keys.Resumed).Err(); err != nil {
		t.Fatal(err)
	}
	wantPaused(t, "an epoch", leader, names, []string{"c"}, nil)
	if err := rdb.Del(ctx, leader.Keys.Paused, leader.Keys.Epoch).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HSet(ctx, leader.Keys.Paused, "a", `{"reason":"older release, after the loss","at":3}`).Err(); err != nil {
		t.Fatal(err)
	}
	wantPaused(t, "a loss and an older release's pause", leader, names, []string{"a"}, nil)
}

// roundTrips counts the client's round trips to Redis: a command, or a
// pipeline of them.
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); name != "hello" && name != "client" {
			r.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		r.n.Add(1)
		return next(ctx, cmds)
	}
}

// While the hashes are small, a dispatch's pause states cost one call
// whatever the number of names, and none of the names' fields; past
// pauseCacheFields they are read by name again, and still right, in the
// same round trip as the check.
func TestPauseStatesCostOneCallWhileThePausesAreFew(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Shared(t)
	counted := redistest.Shared(t).(*redis.Client)
	calls := redistest.CountCommands(counted)
	trips := &roundTrips{}
	counted.AddHook(trips)
	ns := redistest.Uniq("pausecost")
	s := store.New(counted, ns, 10, time.Hour)
	names := make([]string, 5000)
	for i := range names {
		names[i] = fmt.Sprintf("job-%04d", i)
	}
	if err := s.SetPause(ctx, names[17], store.Pause{Reason: "x", At: 1}); err != nil {
		t.Fatal(err)
	}
	wantPaused(t, "one pause", s, names, []string{names[17]}, nil) // reads the hashes
	before := calls.Load()
	wantPaused(t, "nothing new", s, names, []string{names[17]}, nil)
	if n := calls.Load() - before; n != 1 {
		t.Errorf("a read of 5,000 names' pause states with the copy current sent %d commands, want 1", n)
	}
	// 3,000 pauses, more than the copy keeps: written as an older
	// release would, to be quick.
	values := map[string]any{}
	for _, name := range names[:3000] {
		values[name] = `{"reason":"many","at":1}`
	}
	if err := rdb.HSet(ctx, s.Keys.Paused, values).Err(); err != nil {
		t.Fatal(err)
	}
	wantPaused(t, "3,000 pauses", s, names, names[:3000], nil)
	before, beforeTrips := calls.Load(), trips.n.Load()
	wantPaused(t, "3,000 pauses, read again", s, names, names[:3000], nil)
	// The paused hash, a hash table, is read by name (20 HMGETs); the
	// resumed hash, empty at the last check, whole, in one HSCAN step.
	if n, rt := calls.Load()-before, trips.n.Load()-beforeTrips; n != 1+20+1 || rt != 1 {
		t.Errorf("with 3,000 pauses a read of 5,000 names sent %d commands in %d round trips, want 22 in 1", n, rt)
	}
	// A window written since the last check, into a hash that check found
	// empty, is read all the same: a size chooses how, never whether.
	if err := rdb.HSet(ctx, s.Keys.Resumed, names[4000], "5 9").Err(); err != nil {
		t.Fatal(err)
	}
	wantPaused(t, "3,000 pauses and a window written since", s, names, names[:3000], names[4000:4001])
	if err := rdb.HDel(ctx, s.Keys.Resumed, names[4000]).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HDel(ctx, s.Keys.Paused, names[1:3000]...).Err(); err != nil {
		t.Fatal(err)
	}
	wantPaused(t, "all but one resumed", s, names, names[:1], nil)
	before = calls.Load()
	wantPaused(t, "nothing new again", s, names, names[:1], nil)
	if n := calls.Load() - before; n != 1 {
		t.Errorf("with the pauses few again, a read sent %d commands, want 1", n)
	}
}
