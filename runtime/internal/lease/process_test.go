package lease

import (
	"context"
	"os"
	"testing"
	"time"
)

// Each replica's heartbeat says which process it is (its pid and host),
// so an operator can act on the replica a page names; a released or
// stale replica is no longer listed with one.
func TestObserveNamesEachReplicasProcess(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 2, time.Second)
	for _, l := range b.leases {
		if _, err := l.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
	}
	h, err := Observe(ctx, b.rdb, b.keys, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	want := Process{PID: os.Getpid(), Host: host}
	for _, name := range []string{"r0", "r1"} {
		if got := h.Processes[name]; got != want {
			t.Errorf("replica %s is process %+v, want %+v", name, got, want)
		}
	}
	b.leases[1].Release(ctx)
	if h, _ = Observe(ctx, b.rdb, b.keys, time.Minute); len(h.Processes) != 1 || h.Processes["r0"] != want {
		t.Errorf("after r1's release the processes are %+v, want r0's alone", h.Processes)
	}
	// Every heartbeat counts as stale with a staleness of 0: r0 is pruned,
	// process and all.
	if h, _ = Observe(ctx, b.rdb, b.keys, 0); len(h.Replicas) != 0 || len(h.Processes) != 0 {
		t.Errorf("with every heartbeat stale: replicas %v, processes %+v; want none", h.Replicas, h.Processes)
	}
	if n, _ := b.rdb.HLen(ctx, b.keys.ReplicaProcesses).Result(); n != 0 {
		t.Errorf("%d processes left in Redis after their replicas were pruned", n)
	}
}
