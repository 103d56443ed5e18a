package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/belfry/belfry/internal/redistest"
	"github.com/belfry/belfry/runtime/internal/pipeline"
	"github.com/redis/go-redis/v9"
)

// Acks.Run (the lease's and the store's scripts) waits on the connection
// the script ran on, and fails a write no replica has.
func TestAckedScriptsFailWithoutAReplica(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := redistest.StartSentinel(t, redistest.SentinelOptions{Sentinels: 1})
	primary, replica := s.Servers[0], s.Servers[1]
	rdb := primary.Client(t)
	acks := pipeline.Acks{Replicas: 1, Timeout: 5 * time.Second}
	if n, err := acks.Run(ctx, rdb, insertScript, []string{"k1"}, "x").Int(); err != nil || n != 1 {
		t.Fatalf("a script with the replica up: %d %v", n, err)
	}
	replica.Kill()
	acks.Timeout = 300 * time.Millisecond
	if _, err := acks.Run(ctx, rdb, insertScript, []string{"k2"}, "x").Int(); !errors.Is(err, pipeline.ErrNotAcked) {
		t.Errorf("a script with the replica down: %v; want ErrNotAcked", err)
	}
	if n, err := (pipeline.Acks{}).Run(ctx, rdb, insertScript, []string{"k3"}, "x").Int(); err != nil || n != 1 {
		t.Errorf("a script with acknowledgements off: %d %v", n, err)
	}
}

// On a cluster client the acknowledged script runs on the node that
// serves its key and waits there: a cluster of primaries without replicas
// runs it and answers ErrNotAcked, not a client error.
func TestAckedScriptsRunOnTheKeysNodeOfACluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.StartCluster(t, 3).Client(t)
	acks := pipeline.Acks{Replicas: 1, Timeout: 100 * time.Millisecond}
	for _, key := range []string{"{a}k", "{b}k", "{c}k"} {
		if _, err := acks.Run(ctx, rdb, insertScript, []string{key}, "x").Int(); !errors.Is(err, pipeline.ErrNotAcked) {
			t.Errorf("%s: %v; want ErrNotAcked", key, err)
		}
		if v, err := rdb.Get(ctx, key).Result(); err != nil || v != "x" {
			t.Errorf("%s after the script: %q %v; want it written", key, v, err)
		}
		if err := acks.Barrier(ctx, rdb, key+":barrier", time.Minute); !errors.Is(err, pipeline.ErrNotAcked) {
			t.Errorf("barrier %s: %v; want ErrNotAcked", key, err)
		}
	}
}

// Acknowledged writes on Redis Cluster while their slot moves to another
// master (MIGRATING and IMPORTING) cannot run: a new key is on neither
// side yet, and the nodes redirect the write's pinning WATCH to each
// other. An enqueue and a script fail saying the slot is moving (or with
// the cluster's own answer), not as a pipeline that ended without a
// reply; a barrier fails rather than report writes acknowledged that it
// never waited for. Once the slot has moved they run on the new master.
func TestAckedWritesWhileTheirSlotMovesSayItMoves(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cluster := redistest.StartCluster(t, 3)
	rdb := cluster.Client(t)
	queue, ns := redistest.Uniq("moving"), redistest.Uniq("ns")
	plain, acked := pipeline.NewClient(rdb), pipeline.NewClient(rdb)
	acked.Acks = pipeline.Acks{Replicas: 1, Timeout: 100 * time.Millisecond}
	for i := range 3 {
		if _, err := plain.Enqueue(ctx, pipeline.Task{Type: "t", Queue: queue, ID: fmt.Sprint("before-", i)}); err != nil {
			t.Fatal(err)
		}
	}
	enqueue := func(id string) error {
		fence := pipeline.WithFence(ctx, &pipeline.Fence{Namespace: ns, Value: "r0|a|1"})
		return acked.EnqueueAll(fence, []pipeline.Item{{Task: pipeline.Task{Type: "t", Queue: queue, ID: id}}})[0].Err
	}
	source, _, err := cluster.MasterOf(ctx, pipeline.TaskKey(queue, "x"))
	if err != nil {
		t.Fatal(err)
	}
	target := cluster.Masters[0]
	if target == source {
		target = cluster.Masters[1]
	}
	script := func(key string) error { return acked.Acks.Run(ctx, rdb, insertScript, []string{key}, "x").Err() }
	barrier := func(key string) error { return acked.Acks.Barrier(ctx, rdb, key, time.Minute) }
	var enqueued, scripted, barred error
	moves := 0
	if _, err := cluster.MigrateSlotOf(ctx, pipeline.TaskKey(queue, "x"), target, func() {
		if moves++; moves == 1 {
			enqueued = enqueue("mid-move")
			scripted = script("asynq:{" + queue + "}:script-mid-move")
			barred = barrier("asynq:{" + queue + "}:barrier-mid-move")
		}
	}); err != nil {
		t.Fatal(err)
	}
	for what, err := range map[string]error{"an enqueue": enqueued, "a script": scripted, "a barrier": barred} {
		var reply redis.Error
		if !errors.Is(err, pipeline.ErrSlotMoving) && !errors.As(err, &reply) {
			t.Errorf("%s acknowledged while its slot moves: %v; want ErrSlotMoving or the cluster's answer", what, err)
		}
	}
	for what, err := range map[string]error{
		"an enqueue": enqueue("after-move"),
		"a script":   script("asynq:{" + queue + "}:script-after-move"),
		"a barrier":  barrier("asynq:{" + queue + "}:barrier-after-move"),
	} {
		if !errors.Is(err, pipeline.ErrNotAcked) {
			t.Errorf("%s after the move: %v; want it run on the new master (ErrNotAcked: the masters have no replicas)", what, err)
		}
	}
}

// insertScript inserts a key unless it exists.
var insertScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
return 1`)

// The cost of acknowledgements per fenced enqueue, on a primary with one
// replica on the same host: each sub-benchmark is one fenced insert per
// op, with and without WAIT for the replica.
func BenchmarkFencedInsertReplicaAcks(b *testing.B) {
	ctx := context.Background()
	s := redistest.StartSentinel(b, redistest.SentinelOptions{Sentinels: 1})
	rdb := s.Servers[0].Client(b)
	rdb.Set(ctx, "lease", "r0|1", 0)
	fence := pipeline.WithFence(ctx, &pipeline.Fence{Key: "lease", Value: "r0|1"})
	for _, replicas := range []int{0, 1} {
		b.Run("acks="+string(rune('0'+replicas)), func(b *testing.B) {
			pc := pipeline.NewClient(rdb)
			pc.Acks = pipeline.Acks{Replicas: replicas, Timeout: time.Second}
			for b.Loop() {
				task := pipeline.Task{Type: "bench", Queue: "bench", ID: string(rune('a'+replicas)) + ":" + time.Now().Format(time.RFC3339Nano)}
				if _, err := pc.Enqueue(fence, task); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// On a cluster client an acknowledged write is one round trip to the
// master of its slot, the script and its WAIT in one pipeline, not a
// WATCH to pin the connection, the script, the WAIT and an UNWATCH: the
// leader's enqueue and its commit each wait for a replica by default on a
// cluster, and each round trip is the fire lag of a slot. A client whose
// slot map is stale (the slot migrated to another master) still writes,
// acknowledged, following the redirect.
func TestAckedWritesOnAClusterTakeOneRoundTrip(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := redistest.StartClusterWithReplicas(t, 3, 1)
	if err := c.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	// go-redis's default read timeout, which the pipeline must fit
	// (onKeysNode); the harness's client has a shorter one.
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), ReadTimeout: 3 * time.Second})
	t.Cleanup(func() { rdb.Close() })
	trips := &roundTrips{}
	rdb.OnNewNode(func(node *redis.Client) { node.AddHook(trips) })
	// Long enough for a replica's answer on a busy machine (the race run
	// beside other tests), short enough that the one-round-trip pipeline
	// fits go-redis's default read timeout (onKeysNode).
	acks := pipeline.Acks{Replicas: 1, Timeout: time.Second}

	// The first script of a node may be loaded there first (NOSCRIPT).
	if n, err := acks.Run(ctx, rdb, insertScript, []string{"{a}first"}, "x").Int(); err != nil || n != 1 {
		t.Fatalf("the first script: %d %v", n, err)
	}
	trips.reset()
	if n, err := acks.Run(ctx, rdb, insertScript, []string{"{a}k"}, "x").Int(); err != nil || n != 1 {
		t.Fatalf("a script: %d %v", n, err)
	}
	if got := trips.reset(); len(got) != 1 || got[0] != "evalsha wait" {
		t.Errorf("an acknowledged script sent %q; want one round trip, [evalsha wait]", got)
	}

	pc := pipeline.NewClient(rdb)
	pc.Acks = acks
	fence := pipeline.WithFence(ctx, &pipeline.Fence{Namespace: "ns", Value: "r0|i|1"})
	task := func(id string) pipeline.Task { return pipeline.Task{Type: "tick", ID: id, Queue: "q"} }
	if _, err := pc.Enqueue(fence, task("first")); err != nil { // and asynq's set of queues
		t.Fatalf("the first enqueue: %v", err)
	}
	trips.reset()
	if inserted, err := pc.Enqueue(fence, task("second")); err != nil || !inserted {
		t.Fatalf("a fenced enqueue: %v %v", inserted, err)
	}
	if got := trips.reset(); len(got) != 1 || got[0] != "eval wait" {
		t.Errorf("an acknowledged enqueue sent %q; want one round trip, [eval wait]", got)
	}

	// The slot of {a} moves to another master behind the client's back.
	from, _, err := c.MasterOf(ctx, "{a}k")
	if err != nil {
		t.Fatal(err)
	}
	to := c.Masters[0]
	if to == from {
		to = c.Masters[1]
	}
	if _, err := c.MigrateSlotOf(ctx, "{a}k", to, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := acks.Run(ctx, rdb, insertScript, []string{"{a}moved"}, "y").Int(); err != nil || n != 1 {
		t.Fatalf("a script after its slot moved: %d %v", n, err)
	}
	if v, err := rdb.Get(ctx, "{a}moved").Result(); err != nil || v != "y" {
		t.Errorf("after its slot moved: %q %v; want it written", v, err)
	}
}

// roundTrips records each round trip of the node clients it is added to:
// a command, or a pipeline's commands, by name.
type roundTrips struct {
	mu    sync.Mutex
	trips []string
}

func (r *roundTrips) reset() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	got := r.trips
	r.trips = nil
	return got
}

func (r *roundTrips) add(cmds []redis.Cmder) {
	names := make([]string, len(cmds))
	for i, c := range cmds {
		names[i] = c.Name()
	}
	r.mu.Lock()
	r.trips = append(r.trips, strings.Join(names, " "))
	r.mu.Unlock()
}

func (r *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		r.add([]redis.Cmder{cmd})
		return err
	}
}

func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		r.add(cmds)
		return err
	}
}

// The same on a cluster client (three masters with a replica each), where
// acknowledgements are the default: one fenced insert per op, the task's
// queue on one master.
func BenchmarkFencedInsertReplicaAcksCluster(b *testing.B) {
	ctx := context.Background()
	c := redistest.StartClusterWithReplicas(b, 3, 1)
	if err := c.WaitSynced(ctx); err != nil {
		b.Fatal(err)
	}
	rdb := c.Client(b)
	fence := pipeline.WithFence(ctx, &pipeline.Fence{Namespace: "ns", Value: "r0|i|1"})
	for _, replicas := range []int{0, 1} {
		b.Run("acks="+string(rune('0'+replicas)), func(b *testing.B) {
			pc := pipeline.NewClient(rdb)
			pc.Acks = pipeline.Acks{Replicas: replicas, Timeout: 400 * time.Millisecond}
			for b.Loop() {
				task := pipeline.Task{Type: "bench", Queue: "bench", ID: string(rune('a'+replicas)) + ":" + time.Now().Format(time.RFC3339Nano)}
				if _, err := pc.Enqueue(fence, task); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// countScript counts its runs: a write that must run once.
var countScript = redis.NewScript(`return redis.call('INCR', KEYS[1])`)

// An acknowledged write on a cluster client whose connection drops while
// its WAIT blocks (a replica lost mid-failover, a proxy reset) ran once:
// on a client that retries (MaxRetries), the pipeline of the script and
// its WAIT is not sent again, and the write says it was not acknowledged
// rather than fail as if it never ran. The same for the fenced enqueue:
// its task is written and the enqueue is marked unacknowledged, which
// the core's in-doubt bookkeeping follows.
func TestAckedWriteRunsOnceWhenItsWaitsConnectionDrops(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cluster := redistest.StartCluster(t, 3) // no replicas: every WAIT blocks for its timeout
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs(), MaxRetries: 3})
	t.Cleanup(func() { rdb.Close() })
	acks := pipeline.Acks{Replicas: 1, Timeout: 2 * time.Second}

	// dropWait kills the connection of the WAIT that blocks on key's
	// master, once it blocks there.
	dropWait := func(key string) <-chan error {
		dropped := make(chan error, 1)
		node, err := rdb.MasterForKey(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		admin := redis.NewClient(&redis.Options{Addr: node.Options().Addr})
		go func() {
			defer admin.Close()
			for deadline := time.Now().Add(acks.Timeout); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
				list, err := admin.ClientList(ctx).Result()
				if err != nil {
					dropped <- err
					return
				}
				for _, line := range strings.Split(list, "\n") {
					if fields := strings.Fields(line); len(fields) > 0 && strings.Contains(line, " cmd=wait ") {
						dropped <- admin.Do(ctx, "client", "kill", "id", strings.TrimPrefix(fields[0], "id=")).Err()
						return
					}
				}
			}
			dropped <- errors.New("no WAIT blocked on the key's master")
		}()
		return dropped
	}

	key := "{drop}runs"
	if err := countScript.Load(ctx, rdb).Err(); err != nil { // on every master: no NOSCRIPT detour
		t.Fatal(err)
	}
	dropped := dropWait(key)
	err := acks.Run(ctx, rdb, countScript, []string{key}).Err()
	if err := <-dropped; err != nil {
		t.Fatalf("dropping the WAIT's connection: %v", err)
	}
	if !errors.Is(err, pipeline.ErrNotAcked) {
		t.Errorf("a script whose WAIT's connection dropped: %v; want ErrNotAcked", err)
	}
	if n, err := rdb.Get(ctx, key).Int(); err != nil || n != 1 {
		t.Errorf("the script ran %d times (%v); want once", n, err)
	}

	queue := "drop"
	client := pipeline.NewClient(rdb)
	client.Acks = acks
	fence := pipeline.WithFence(ctx, &pipeline.Fence{Namespace: "ns", Value: "r0|a|1"})
	dropped = dropWait(pipeline.TaskKey(queue, "task"))
	res := client.EnqueueAll(fence, []pipeline.Item{{Task: pipeline.Task{Type: "t", Queue: queue, ID: "task"}}})[0]
	if err := <-dropped; err != nil {
		t.Fatalf("dropping the enqueue's WAIT's connection: %v", err)
	}
	if !res.Unacked || !errors.Is(res.Err, pipeline.ErrNotAcked) {
		t.Errorf("an enqueue whose WAIT's connection dropped: unacked=%v err=%v; want it unacknowledged (ErrNotAcked)", res.Unacked, res.Err)
	}
	if n, err := rdb.Exists(ctx, pipeline.TaskKey(queue, "task")).Result(); err != nil || n != 1 {
		t.Errorf("the enqueue's task: %d %v; want it written", n, err)
	}
}
