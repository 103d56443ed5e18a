package runtime_test

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
	"github.com/belfry/belfry/runtime/internal/clock"
	"github.com/belfry/belfry/runtime/internal/store"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// Redis loses its data under a running leader (FLUSHALL; a restart without
// persistence is the same): the cursors and task IDs are gone. The leader
// notices when it takes the lease again, moves every cursor past what any
// replica may have enqueued, and records the window. No slot runs twice.
func TestLostDataIsDetectedAndNoSlotRunsTwice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := startPrivateRedis(t)
	rdb := srv.Client(t)
	queue, ns := uniq("q"), uniq("ns")
	exec := newExecutions()
	reg := registry.MustNew(registry.Schedule{Name: "tick", Expr: "* * * * * *", Queue: queue, Handler: exec.handler})
	rt, err := runtime.New(reg, runtime.Options{Redis: rdb, Namespace: ns, LeaseTTL: time.Second, SkewMargin: 2 * time.Second,
		Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	startWorker(t, rdb, queue, func(mux *asynq.ServeMux) { rt.RegisterHandlers(mux) })
	runUntilTheEnd(t, rt)
	waitFor(t, 10*time.Second, "runs before the loss", func() bool { return len(exec.slots("tick")) >= 3 })

	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	// asynq's workers re-announce their queue on their own.
	waitFor(t, 10*time.Second, "the loss to be detected", func() bool {
		lost, _ := rt.Redis().LostWrites(ctx)
		return len(lost) == 1
	})
	lost, _ := rt.Redis().LostWrites(ctx)
	l := lost[0]
	if !strings.Contains(l.Reason, "epoch is gone") || !l.To.After(l.From) || l.To.Sub(l.At) < 2*time.Second {
		t.Errorf("loss recorded as %+v; want the epoch reason and a window reaching SkewMargin past the detection", l)
	}
	waitFor(t, 15*time.Second, "runs after the window", func() bool {
		for slot := range exec.slots("tick") {
			if time.Unix(slot, 0).After(l.To) {
				return true
			}
		}
		return false
	})
	for slot, n := range exec.slots("tick") {
		if n > 1 {
			t.Errorf("slot %s ran %d times", time.Unix(slot, 0).UTC(), n)
		}
	}
	if h := rt.Health(ctx); h.Status != "unhealthy" || !strings.Contains(strings.Join(h.Problems, ";"), "may not have run") {
		t.Errorf("health after the loss: %+v", h)
	}
}

// A failover to a replica that was behind shows as a fencing token no
// larger than one this replica held: detected, and the cursors moved.
func TestATokenGoingBackwardsIsALoss(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, keys, rt := leadingWithToken6(t)
	// The promoted replica had not seen the last writes: the counter and the
	// lease are older, the epoch survived.
	rdb.Set(ctx, keys.Token, 2, 0)
	rdb.Del(ctx, keys.Lease)
	waitFor(t, 10*time.Second, "the loss to be detected", func() bool {
		lost, _ := rt.Redis().LostWrites(ctx)
		return len(lost) == 1 && strings.Contains(lost[0].Reason, "fencing token went back from 6 to 3")
	})
}

// leadingWithToken6 runs a runtime on a namespace of the shared Redis
// whose token counter was at 5, until it leads, with token 6.
func leadingWithToken6(t *testing.T) (redis.UniversalClient, store.Keys, *runtime.Runtime) {
	t.Helper()
	rdb := sharedRedis(t)
	ns := uniq("ns")
	keys := store.NewKeys(ns)
	rdb.Set(context.Background(), keys.Token, 5, 0)
	rt, err := runtime.New(registry.MustNew(idleSchedule()), runtime.Options{Redis: rdb, Namespace: ns, LeaseTTL: time.Second, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	runUntilTheEnd(t, rt)
	waitFor(t, 5*time.Second, "the replica to lead", func() bool { return rt.Leadership().Leading() && rt.Scheduling() })
	return rdb, keys, rt
}

// After a loss, the store as it was before it can come back: the old
// primary, demoted, is promoted again before it caught up with the primary
// that replaced it. Its token is higher than any handed out since the
// first loss, so the token alone shows nothing; the epoch does, since a
// recorded loss starts a new one. The second loss is detected and
// recorded too.
func TestALossAfterTheOldPrimaryReturnsIsDetected(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, keys, rt := leadingWithToken6(t)
	// What the old primary keeps: the epoch and the token counter of now.
	oldEpoch, err := rdb.Get(ctx, keys.Epoch).Result()
	if err != nil {
		t.Fatal(err)
	}
	// The first failover promotes a replica that was behind.
	rdb.Set(ctx, keys.Token, 2, 0)
	rdb.Del(ctx, keys.Lease)
	waitFor(t, 10*time.Second, "the first loss to be detected", func() bool {
		lost, _ := rt.Redis().LostWrites(ctx)
		return len(lost) == 1 && rt.Scheduling()
	})
	// The second promotes the old primary, which never caught up: its
	// epoch, its counter (token 6 was its last), none of the writes since.
	if _, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, keys.Token, 6, 0)
		p.Set(ctx, keys.Epoch, oldEpoch, 0)
		p.Del(ctx, keys.Lease)
		p.Del(ctx, keys.Lost)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the second loss to be detected", func() bool {
		lost, _ := rt.Redis().LostWrites(ctx)
		return len(lost) == 1 && strings.Contains(lost[0].Reason, "epoch")
	})
}

// The same loss with skewed clocks: the leader runs 3s ahead, so before the
// flush it enqueued slots up to 3s in the future. A replica that takes
// over runs 3s behind; starting its fresh cursors from its own "now" would
// run those slots again, since their task IDs went with the flush. The
// third replica, which also knew the old epoch, leads last: it sees the same
// loss, already handled, and records it no second time.
func TestAFollowerThatTakesOverAfterALossRunsNoSlotTwice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := startPrivateRedis(t)
	rdb := srv.Client(t)
	queue, ns := uniq("q"), uniq("ns")
	exec := newExecutions()
	reg := registry.MustNew(registry.Schedule{Name: "tick", Expr: "* * * * * *", Queue: queue, Handler: exec.handler})
	offsets := []time.Duration{3 * time.Second, -3 * time.Second, 0}
	var rts []*runtime.Runtime
	for i, offset := range offsets {
		rt, err := runtime.NewWithClock(reg, runtime.Options{Redis: rdb, Namespace: ns, LeaseTTL: time.Second,
			SkewMargin: 4 * time.Second, Replica: "r" + string(rune('0'+i)), Logger: testLogger(t)}, clock.Offset(offset))
		if err != nil {
			t.Fatal(err)
		}
		rts = append(rts, rt)
	}
	startWorker(t, rdb, queue, func(mux *asynq.ServeMux) { rts[0].RegisterHandlers(mux) })
	var wg sync.WaitGroup
	stops := make([]context.CancelFunc, len(rts))
	start := func(i int) {
		runCtx, stop := context.WithCancel(ctx)
		stops[i] = stop
		wg.Go(func() { rts[i].Run(runCtx) })
	}
	t.Cleanup(func() {
		for _, stop := range stops {
			if stop != nil {
				stop()
			}
		}
		wg.Wait()
		for _, rt := range rts {
			rt.Close()
		}
	})
	start(0)
	waitFor(t, 5*time.Second, "the replica ahead to lead", rts[0].Scheduling)
	start(1)
	waitFor(t, 10*time.Second, "runs before the loss", func() bool { return len(exec.slots("tick")) >= 4 })
	start(2)
	waitFor(t, 5*time.Second, "the followers to know the epoch", func() bool { return rts[1].KnowsEpoch() && rts[2].KnowsEpoch() })

	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	stops[0]() // the replica ahead goes away; the one behind or the third takes over
	var next int
	waitFor(t, 10*time.Second, "another replica to lead", func() bool {
		for _, i := range []int{1, 2} {
			if rts[i].Scheduling() {
				next = i
				return true
			}
		}
		return false
	})
	took := time.Now()
	waitFor(t, 15*time.Second, "runs after the takeover", func() bool {
		for slot := range exec.slots("tick") {
			if time.Unix(slot, 0).After(took.Add(5 * time.Second)) {
				return true
			}
		}
		return false
	})
	// The last replica leads.
	last := 3 - next
	stops[next]()
	waitFor(t, 10*time.Second, "the last replica to lead", rts[last].Scheduling)
	before := len(exec.slots("tick"))
	waitFor(t, 15*time.Second, "runs under the last replica", func() bool { return len(exec.slots("tick")) >= before+2 })
	for slot, n := range exec.slots("tick") {
		if n > 1 {
			t.Errorf("slot %s ran %d times", time.Unix(slot, 0).UTC(), n)
		}
	}
	if lost, _ := rts[last].Redis().LostWrites(ctx); len(lost) != 1 || lost[0].Replica != rts[next].Replica() {
		t.Errorf("losses recorded: %+v, want one, by %s", lost, rts[next].Replica())
	}
}

// followerThatSawTheLease runs two replicas until the follower knows the
// store's epoch and the leader's token.
func followerThatSawTheLease(t *testing.T) (redis.UniversalClient, *cluster, store.Keys, int, *runtime.Runtime) {
	t.Helper()
	rdb := sharedRedis(t)
	c := newCluster(t, rdb, 2, runtime.Options{LeaseTTL: time.Second}, idleSchedule())
	leader := c.leaderIndex(t)
	follower := c.rts[1-leader]
	waitFor(t, 5*time.Second, "the follower to know the store", follower.KnowsEpoch)
	waitFor(t, 5*time.Second, "the follower to have seen the leader's lease", func() bool { return follower.SeenToken() == 1 })
	return rdb, c, store.NewKeys(c.ns), leader, follower
}

// A follower learns the fencing tokens of the leases it finds held, so the
// follower that takes over after a failover to a replica that was behind
// notices the token gone back, not only the replica that led.
func TestAFollowerNoticesATokenGoneBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, c, keys, leader, follower := followerThatSawTheLease(t)
	// The old leader goes away, and at the same moment the promoted replica
	// turns out to have been behind: an older counter, no lease, and the
	// epoch it already had. The leader is stopped first: had it seen its
	// lease gone, it would have taken the lease again before the follower.
	c.cancels[leader]()
	if _, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, keys.Token, 0, 0)
		p.Del(ctx, keys.Lease)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// The follower may take the lease the stopped leader released before
	// the counter goes back (then it saw its own token 2), or after.
	wentBack := regexp.MustCompile(`fencing token went back from [12] to 1\b`)
	waitFor(t, 10*time.Second, "the follower to notice the loss", func() bool {
		lost, _ := follower.Redis().LostWrites(ctx)
		return len(lost) == 1 && lost[0].Replica == follower.Replica() && wentBack.MatchString(lost[0].Reason)
	})
}

// failPauses fails the leader's read of the pauses while on, so each
// dispatch fails before it enqueues: the cursor stays behind the slots
// that come due, as under a leader that cannot write.
type failPauses struct {
	key string
	on  atomic.Bool
}

func (h *failPauses) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *failPauses) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *failPauses) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if args := cmd.Args(); h.on.Load() && len(args) > 1 && args[0] == "hmget" && args[1] == h.key {
			cmd.SetErr(errors.New("injected: Redis refuses the leader's writes"))
			return cmd.Err()
		}
		return next(ctx, cmd)
	}
}

// Data lost while the leader was behind (it could not write for a while,
// so slots waited within grace) takes the cursors that said so: the
// recorded window must reach back over every slot that had not run, not
// just the lease TTLs before the loss was noticed.
func TestSlotsPendingWhenDataIsLostAreInTheWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := startPrivateRedis(t)
	rdb := redis.NewClient(&redis.Options{Network: "unix", Addr: srv.Socket, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	queue, ns := uniq("q"), uniq("ns")
	hook := &failPauses{key: store.NewKeys(ns).Paused}
	rdb.AddHook(hook)
	exec := newExecutions()
	reg := registry.MustNew(registry.Schedule{Name: "tick", Expr: "* * * * * *", Queue: queue, Handler: exec.handler})
	rt, err := runtime.New(reg, runtime.Options{Redis: rdb, Namespace: ns, LeaseTTL: time.Second, SkewMargin: time.Second,
		Grace: 20 * time.Second, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	startWorker(t, srv.Client(t), queue, func(mux *asynq.ServeMux) { rt.RegisterHandlers(mux) })
	runUntilTheEnd(t, rt)
	waitFor(t, 10*time.Second, "runs before the trouble", func() bool { return len(exec.slots("tick")) >= 2 })
	hook.on.Store(true)
	behind := time.Now()
	waitFor(t, 10*time.Second, "the leader to fall 5s behind", func() bool { return time.Since(behind) > 5*time.Second })
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	hook.on.Store(false)
	waitFor(t, 10*time.Second, "the loss to be detected", func() bool {
		lost, _ := rt.Redis().LostWrites(ctx)
		return len(lost) == 1
	})
	lost, _ := rt.Redis().LostWrites(ctx)
	l := lost[0]
	waitFor(t, 15*time.Second, "runs after the window", func() bool {
		for slot := range exec.slots("tick") {
			if time.Unix(slot, 0).After(l.To) {
				return true
			}
		}
		return false
	})
	runs := exec.slots("tick")
	var first int64 = 1 << 62
	for slot := range runs {
		first = min(first, slot)
	}
	s := reg.Schedules()[0]
	for slot := time.Unix(first, 0); slot.Before(l.To.Add(2 * time.Second)); slot = s.Next(slot) {
		n := runs[slot.Unix()]
		inWindow := !slot.Before(l.From) && !slot.After(l.To)
		switch {
		case n > 1:
			t.Errorf("slot %s ran %d times", slot.UTC().Format(time.TimeOnly), n)
		case n == 0 && !inWindow:
			t.Errorf("slot %s never ran and is outside the recorded window %s to %s", slot.UTC().Format(time.TimeOnly),
				l.From.Format(time.TimeOnly), l.To.Format(time.TimeOnly))
		}
	}
}

// A loss followed by a replica that has no memory of the store before it
// (one started after a FLUSHALL) taking the lease: that holder finds nothing
// to compare and reports nothing. The follower that knew the store sees the
// token gone back; if it never leads, it must still record the loss, or the
// slots the loss took are missed without a word.
func TestAFollowerThatNeverLeadsStillRecordsALossItSaw(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, c, keys, leader, follower := followerThatSawTheLease(t)
	freshHolderAfterALoss(t, rdb, keys)
	c.cancels[leader]()
	waitFor(t, 10*time.Second, "the follower to record the loss", func() bool {
		lost, _ := follower.Redis().LostWrites(ctx)
		return len(lost) == 1 && lost[0].Replica == follower.Replica() && strings.Contains(lost[0].Reason, "fencing token went back from 1 to 1")
	})
	if follower.Leadership().Leading() {
		t.Fatal("the follower leads: the test meant it never to")
	}
	lost, _ := follower.Redis().LostWrites(ctx)
	if now := time.Now(); lost[0].From.After(now.Add(-30*time.Second)) || lost[0].To.Before(now) {
		t.Errorf("loss window %s..%s does not reach back over grace and up to now", lost[0].From, lost[0].To)
	}
	// It records the loss once, not at every look at the lease: let the
	// follower look a few more times (its lease attempts come every TTL/3).
	waitFor(t, 10*time.Second, "three seconds of the fresh holder's lease to pass", func() bool {
		pttl, err := rdb.PTTL(ctx, keys.Lease).Result()
		return err == nil && pttl < time.Minute-3*time.Second
	})
	if lost, _ := follower.Redis().LostWrites(ctx); len(lost) != 1 {
		t.Errorf("losses recorded: %+v, want the one", lost)
	}
}

// A follower that recorded a loss it saw takes the store after the loss as
// the normal from then on: when it leads later it does not find the same
// loss again, record a second window over slots the holder since ran, and
// move every cursor past its own now.
func TestAFollowerThatRecordedALossDoesNotFindItAgainWhenItLeads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, c, keys, leader, follower := followerThatSawTheLease(t)
	freshHolderAfterALoss(t, rdb, keys)
	c.cancels[leader]()
	waitFor(t, 10*time.Second, "the follower to record the loss", func() bool {
		lost, _ := follower.Redis().LostWrites(ctx)
		return len(lost) == 1
	})
	// The fresh holder goes away; the follower leads.
	if err := rdb.Del(ctx, keys.Lease).Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the follower to schedule", follower.Scheduling)
	if lost, _ := follower.Redis().LostWrites(ctx); len(lost) != 1 {
		t.Errorf("losses recorded: %+v, want the one the follower saw", lost)
	}
}

// freshHolderAfterALoss makes the store look as it does when the data went
// and a replica started after it leads at once and stays: token 1 again
// under another value, a new epoch.
func freshHolderAfterALoss(t *testing.T, rdb redis.UniversalClient, keys store.Keys) {
	t.Helper()
	ctx := context.Background()
	if _, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, keys.Token, 1, 0)
		p.Set(ctx, keys.Epoch, "after-the-loss", 0)
		p.Set(ctx, keys.Lease, "fresh|0123456789abcdef|1", time.Minute)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
