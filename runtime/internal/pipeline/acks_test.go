package pipeline_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/belfry/belfry/runtime/internal/pipeline"
	"github.com/belfry/belfry/runtime/internal/redistest"
)

// With acknowledgements on, a fenced write counts only once a replica has
// it. A conflict (the task an earlier, unacknowledged attempt inserted
// through another connection) is acknowledged too, and not before the
// replica has that task.
func TestFencedWritesWaitForReplicas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := redistest.StartSentinel(t, redistest.SentinelOptions{Sentinels: 1})
	primary, replica := s.Servers[0], s.Servers[1]
	rdb, replicaRDB := primary.Client(t), replica.Client(t)
	pc := pipeline.NewClient(rdb)
	// Long enough for a loaded machine where a replica answers, short
	// where none can.
	patient, impatient := pipeline.Acks{Replicas: 1, Timeout: 5 * time.Second}, pipeline.Acks{Replicas: 1, Timeout: 300 * time.Millisecond}
	pc.Acks = patient
	rdb.Set(ctx, "lease", "r0|1", time.Minute)
	fence := pipeline.WithFence(ctx, &pipeline.Fence{Key: "lease", Value: "r0|1"})

	if n, err := insertScript.Run(fence, pc, []string{"task:a"}, "x").Int(); err != nil || n != 1 {
		t.Fatalf("a fenced insert with the replica up: %d %v; want it inserted and acknowledged", n, err)
	}
	if got, _ := replicaRDB.Get(ctx, "task:a").Result(); got != "x" {
		t.Errorf("after an acknowledged insert the replica has task:a = %q, want x", got)
	}

	replica.Pause()
	pc.Acks = impatient
	if err := primary.Client(t).Set(ctx, "task:b", "x", 0).Err(); err != nil { // an earlier attempt, on another connection
		t.Fatal(err)
	}
	_, err := insertScript.Run(fence, pc, []string{"task:b"}, "x").Int()
	if !errors.Is(err, pipeline.ErrNotAcked) {
		t.Errorf("a conflict while the replica is paused: %v; want ErrNotAcked", err)
	}
	var unacked atomic.Bool
	_, err = insertScript.Run(pipeline.WithUnacked(fence, &unacked), pc, []string{"task:c"}, "x").Int()
	if !errors.Is(err, pipeline.ErrNotAcked) || !unacked.Load() {
		t.Errorf("an insert while the replica is paused: %v (flagged %v); want ErrNotAcked, flagged", err, unacked.Load())
	}
	replica.Resume()
	pc.Acks = patient
	for _, key := range []string{"task:b", "task:c"} {
		if n, err := insertScript.Run(fence, pc, []string{key}, "x").Int(); err != nil || n != 0 {
			t.Errorf("retrying %s with the replica back: %d %v; want an acknowledged conflict", key, n, err)
		}
	}
}

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
				if err := insertScript.Run(fence, pc, []string{"bench:" + string(rune('a'+replicas)) + ":" + time.Now().Format(time.RFC3339Nano)}, "x").Err(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
