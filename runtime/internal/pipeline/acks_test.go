package pipeline_test

import (
	"context"
	"errors"
	"fmt"
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
