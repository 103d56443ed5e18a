package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/belfry/belfry/internal/redistest"
	"github.com/belfry/belfry/runtime/internal/pipeline"
	"github.com/redis/go-redis/v9"
)

// A fenced task goes in, with its mark, only while the lease holds the
// fence's value; a conflict still raises its mark; a task the fence
// refuses leaves nothing, and says so.
func TestFencedTasksGoInWithTheirMarksOnlyUnderTheirLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Shared(t)
	pc := pipeline.NewClient(rdb)
	lease, queue, cursors, lastID := redistest.Uniq("lease"), redistest.Uniq("task-fence"), redistest.Uniq("cursors"), redistest.Uniq("lastid")
	t.Cleanup(func() { forget(t, rdb, queue) })
	rdb.Set(ctx, lease, "r0|1", time.Minute)
	holder := &pipeline.Fence{Key: lease, Value: "r0|1"}
	enqueue := func(f *pipeline.Fence, slot int64) (bool, error) {
		id := fmt.Sprintf("tick:%d", slot)
		m := &pipeline.Mark{Hash: cursors, Field: "tick", Value: slot, Also: lastID, AlsoValue: id}
		r := pc.EnqueueAll(pipeline.WithFence(ctx, f), []pipeline.Item{{Task: pipeline.Task{Type: "tick", ID: id, Queue: queue}, Mark: m}})[0]
		return r.Inserted, r.Err
	}
	cursor := func() string { return rdb.HGet(ctx, cursors, "tick").Val() }
	if in, err := enqueue(holder, 10); err != nil || !in {
		t.Fatalf("the holder's enqueue: %v %v", in, err)
	}
	if cursor() != "10" || rdb.HGet(ctx, lastID, "tick").Val() != "tick:10" {
		t.Fatalf("after the enqueue of slot 10: cursor %q, last ID %q", cursor(), rdb.HGet(ctx, lastID, "tick").Val())
	}
	rdb.HSet(ctx, pipeline.TaskKey(queue, "tick:11"), "msg", "earlier") // an earlier attempt's
	if in, err := enqueue(holder, 11); err != nil || in {
		t.Fatalf("the enqueue of a task already in: %v %v, want a conflict", in, err)
	}
	if cursor() != "11" {
		t.Errorf("after a conflicting enqueue of slot 11: cursor %q, want 11", cursor())
	}
	if holder.Rejected() {
		t.Error("the fence says it was refused while the lease was the holder's")
	}
	rdb.Set(ctx, lease, "r1|2", time.Minute) // another replica took over
	if _, err := enqueue(holder, 12); !errors.Is(err, pipeline.ErrFenced) || !holder.Rejected() {
		t.Fatalf("the ex-holder's enqueue: %v (rejected %v), want ErrFenced", err, holder.Rejected())
	}
	if n := rdb.Exists(ctx, pipeline.TaskKey(queue, "tick:12")).Val(); n != 0 || cursor() != "11" {
		t.Errorf("a refused enqueue left its task (%d) or moved the cursor to %q", n, cursor())
	}
	// Unfenced (a manual run, on any replica) it goes in, with no mark.
	m := &pipeline.Mark{Hash: cursors, Field: "tick", Value: 99}
	if r := pc.EnqueueAll(ctx, []pipeline.Item{{Task: pipeline.Task{Type: "tick", ID: "manual", Queue: queue}, Mark: m}})[0]; r.Err != nil || !r.Inserted {
		t.Errorf("an unfenced enqueue: %+v", r)
	}
	if cursor() != "11" {
		t.Errorf("an unfenced enqueue wrote a mark: cursor %q", cursor())
	}
}

// EnqueueAll hands thousands of tasks over at once, of two queues, some
// already in: each gets its own answer and its mark, while the lease is
// renewed every millisecond (a renewal aborts nothing: the fence is in the
// script, not a WATCH).
func TestEnqueueAllUnderAFenceWhileTheLeaseIsRenewed(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rdb := redistest.Shared(t)
	pc := pipeline.NewClient(rdb)
	lease, cursors := redistest.Uniq("lease"), redistest.Uniq("cursors")
	queues := []string{redistest.Uniq("task-all-a"), redistest.Uniq("task-all-b")}
	for _, q := range queues {
		t.Cleanup(func() { forget(t, rdb, q) })
	}
	rdb.Set(ctx, lease, "r0|1", time.Minute)
	var renewals sync.WaitGroup
	renewals.Go(func() {
		for ctx.Err() == nil {
			rdb.PExpire(ctx, lease, time.Minute)
			time.Sleep(time.Millisecond)
		}
	})
	defer renewals.Wait()
	defer cancel()
	const n = 3000
	items := make([]pipeline.Item, n)
	for i := range items {
		q, id := queues[i%2], fmt.Sprintf("s%d:1", i)
		items[i] = pipeline.Item{Task: pipeline.Task{Type: "s", ID: id, Queue: q},
			Mark: &pipeline.Mark{Hash: cursors, Field: fmt.Sprint(i), Value: int64(i)}}
		if i%10 == 0 {
			rdb.HSet(ctx, pipeline.TaskKey(q, id), "msg", "earlier")
		}
	}
	items = append(items, pipeline.Item{Task: pipeline.Task{Type: "", ID: "bad", Queue: queues[0]}})
	results := pc.EnqueueAll(pipeline.WithFence(ctx, &pipeline.Fence{Key: lease, Value: "r0|1"}), items)
	for i, r := range results[:n] {
		if r.Err != nil || r.Inserted != (i%10 != 0) {
			t.Fatalf("task %d: %+v, want inserted %v", i, r, i%10 != 0)
		}
	}
	if !errors.Is(results[n].Err, pipeline.ErrBadTask) {
		t.Errorf("the task with no type: %+v, want ErrBadTask", results[n])
	}
	if got := rdb.HLen(ctx, cursors).Val(); got != n {
		t.Errorf("%d marks, want %d", got, n)
	}
	if got := rdb.LLen(ctx, "asynq:{"+queues[0]+"}:pending").Val() + rdb.LLen(ctx, "asynq:{"+queues[1]+"}:pending").Val(); got != n-n/10 {
		t.Errorf("%d pending, want %d", got, n-n/10)
	}
}

// With acknowledgements on, a fenced task counts only once a replica has
// it; a conflict is acknowledged too. Without the replica the enqueue
// fails as not acknowledged, and says the write ran.
func TestFencedTasksWaitForReplicas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := redistest.StartSentinel(t, redistest.SentinelOptions{Sentinels: 1})
	primary, replica := s.Servers[0], s.Servers[1]
	rdb, replicaRDB := primary.Client(t), replica.Client(t)
	pc := pipeline.NewClient(rdb)
	patient, impatient := pipeline.Acks{Replicas: 1, Timeout: 5 * time.Second}, pipeline.Acks{Replicas: 1, Timeout: 300 * time.Millisecond}
	pc.Acks = patient
	rdb.Set(ctx, "lease", "r0|1", time.Minute)
	fence := pipeline.WithFence(ctx, &pipeline.Fence{Key: "lease", Value: "r0|1"})
	task := func(id string) pipeline.Task { return pipeline.Task{Type: "t", ID: id, Queue: "q"} }

	if in, err := pc.Enqueue(fence, task("a")); err != nil || !in {
		t.Fatalf("a fenced enqueue with the replica up: %v %v; want it inserted and acknowledged", in, err)
	}
	if n := replicaRDB.Exists(ctx, pipeline.TaskKey("q", "a")).Val(); n != 1 {
		t.Error("after an acknowledged enqueue the replica does not have the task")
	}

	replica.Pause()
	pc.Acks = impatient
	primary.Client(t).HSet(ctx, pipeline.TaskKey("q", "b"), "msg", "x") // an earlier attempt, on another connection
	if _, err := pc.Enqueue(fence, task("b")); !errors.Is(err, pipeline.ErrNotAcked) {
		t.Errorf("a conflict while the replica is paused: %v; want ErrNotAcked", err)
	}
	if r := pc.EnqueueAll(fence, []pipeline.Item{{Task: task("c")}})[0]; !errors.Is(r.Err, pipeline.ErrNotAcked) || !r.Unacked {
		t.Errorf("an enqueue while the replica is paused: %+v; want ErrNotAcked, flagged unacknowledged", r)
	}
	replica.Resume()
	pc.Acks = patient
	for _, id := range []string{"b", "c"} {
		if in, err := pc.Enqueue(fence, task(id)); err != nil || in {
			t.Errorf("retrying %s with the replica back: %v %v; want an acknowledged conflict", id, in, err)
		}
	}
}

// Behind a slow link (replies 200 ms late) a fenced enqueue lands while
// the holder renews its lease more often than every two round trips: the
// fence is checked inside the script, so no renewal can abort it.
func TestFencedTasksLandBehindASlowLinkWhileTheLeaseIsRenewed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Shared(t)
	proxy := redistest.NewProxy(t, "tcp", redistest.SharedAddr())
	pc := pipeline.NewClient(proxy.Client(t, redis.Options{}))
	lease, queue := redistest.Uniq("lease"), redistest.Uniq("slow-link")
	t.Cleanup(func() { forget(t, rdb, queue) })
	rdb.Set(ctx, lease, "r0|1", time.Minute)
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
	fence := pipeline.WithFence(ctx, &pipeline.Fence{Key: lease, Value: "r0|1"})
	for i := range 3 {
		if in, err := pc.Enqueue(fence, pipeline.Task{Type: "t", Queue: queue, ID: fmt.Sprint(i)}); err != nil || !in {
			t.Fatalf("fenced enqueue %d behind a slow link: %v %v, want it inserted", i, in, err)
		}
	}
}

// Without a lease key to check (Redis Cluster, where the lease is in
// another slot), a fenced task goes in only while no newer term has
// enqueued in its queue: the queue's fence rises to each term that
// enqueues there, never back; an older term is refused with nothing
// written; RaiseFences reports the queues where a newer term is.
func TestQueueFenceRefusesAnOlderTerm(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Shared(t)
	pc := pipeline.NewClient(rdb)
	ns, queue, other := redistest.Uniq("ns"), redistest.Uniq("qfence"), redistest.Uniq("qfence")
	t.Cleanup(func() {
		forget(t, rdb, queue)
		forget(t, rdb, other)
	})
	enqueue := func(term, id string) (*pipeline.Fence, error) {
		f := &pipeline.Fence{Namespace: ns, Value: term}
		r := pc.EnqueueAll(pipeline.WithFence(ctx, f), []pipeline.Item{{Task: pipeline.Task{Type: "tick", ID: id, Queue: queue}}})[0]
		return f, r.Err
	}
	if _, err := enqueue("r0|a|2", "t1"); err != nil {
		t.Fatalf("term 2's enqueue: %v", err)
	}
	if _, err := enqueue("r1|b|3", "t2"); err != nil {
		t.Fatalf("term 3's enqueue after term 2's: %v", err)
	}
	for _, term := range []string{"r0|a|2", "r2|c|3", "r3|d|1"} {
		f, err := enqueue(term, "late-"+term)
		if !errors.Is(err, pipeline.ErrFenced) || !f.Rejected() {
			t.Errorf("term %s after term 3: %v (rejected %v), want ErrFenced", term, err, f.Rejected())
		}
		if n := rdb.Exists(ctx, pipeline.TaskKey(queue, "late-"+term)).Val(); n != 0 {
			t.Errorf("term %s's refused task is in", term)
		}
	}
	if got := rdb.Get(ctx, pipeline.QueueFenceKey(ns, queue)).Val(); got != "r1|b|3" {
		t.Errorf("the queue's fence holds %q, want term 3's", got)
	}
	newer, err := pipeline.RaiseFences(ctx, rdb, ns, "r0|a|2", []string{queue, other})
	if err != nil || len(newer) != 1 || newer[0] != queue {
		t.Errorf("RaiseFences of term 2: newer in %v (%v), want only %s", newer, err, queue)
	}
	if got := rdb.Get(ctx, pipeline.QueueFenceKey(ns, other)).Val(); got != "r0|a|2" {
		t.Errorf("the untouched queue's fence holds %q after RaiseFences, want term 2's", got)
	}
}
