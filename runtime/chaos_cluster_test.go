package runtime_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/belfry/belfry/internal/redistest"
	"github.com/belfry/belfry/runtime/internal/store"
)

// The chaos run on a Redis Cluster (CHAOS_ENGINE=cluster make chaos):
// three masters with a replica each, the namespace's slot on one master and
// the queue's on another, every replica on a cluster client with default
// options. The schedules, the count from the handlers' own log and the
// verdict are TestChaos's; the faults are the replicas' (kill, pause,
// freeze, partition, latency) and the cluster's own.

// chaosClusterFaults are the fault kinds of the cluster run (CHAOS_FAULTS
// selects among them; by default every one):
//
//	kill              SIGKILL the leader, restart it shortly after
//	pause             SIGSTOP the leader for longer than its lease (a zombie)
//	freeze            SIGSTOP the leader for just under its lease (CHAOS_STALL=0 drops it too)
//	partition         black-hole the leader's links to every node for several TTLs, then heal them
//	latency           delay every reply to the leader, from every node, by TTL/8 to TTL/4 for 15-25 s
//	cluster_failover  CLUSTER FAILOVER of the master of the namespace's slot, then of the queue's
//	reshard           move the queue's slot to another master (MIGRATING/IMPORTING and MIGRATE,
//	                  a few keys at a time) while its schedules enqueue
//	master_kill       SIGKILL the master of the queue's slot (of the namespace's in odd minutes);
//	                  its replica takes over, and it comes back as the new master's replica
var chaosClusterFaults = []string{"kill", "pause", "freeze", "partition", "latency", "cluster_failover", "reshard", "master_kill"}

// What a cluster fault hits (chaosEvent.target).
const (
	clusterNamespace = "namespace"
	clusterQueue     = "queue"
)

func TestChaosCluster(t *testing.T) {
	if !*chaosFlag {
		t.Skip("chaos harness is opt-in: run `CHAOS_ENGINE=cluster make chaos` (go test ./runtime -run '^TestChaosCluster$' -chaos -v)")
	}
	runChaosHarness(t, "cluster")
}

// clusterFaults counts the cluster's faults. They run one at a time, each
// in the background: a failover or a resharding takes seconds, during
// which the replicas' faults go on.
type clusterFaults struct {
	mu                               sync.Mutex
	running                          sync.WaitGroup
	failovers, reshards, masterKills int
}

// wait waits for the fault under way, if any.
func (f *clusterFaults) wait() { f.running.Wait() }

// startCluster starts the cluster in the run's directory and picks the
// queue: the first "chaos-<n>" whose slot is on another master than the
// namespace's, so that the fenced enqueue spans two masters.
func (h *chaosHarness) startCluster() {
	t := h.t
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h.cluster = redistest.NewCluster(t, filepath.Join(h.dir, "cluster"), 3, 1)
	t.Cleanup(h.cluster.Close)
	h.rdb = h.cluster.Client(t)
	prev := chaosQueue
	chaosQueue = queueApart(t, ctx, h.cluster, chaosNamespace, func(i int) string { return "chaos-" + strconv.Itoa(i) })
	t.Cleanup(func() { chaosQueue = prev })
	h.logf("cluster of %d nodes in %s; queue %q", len(h.cluster.Nodes), h.cluster.Dir, chaosQueue)
}

// clusterKey is a key in the slot a cluster fault targets.
func clusterKey(target string) string {
	if target == clusterNamespace {
		return store.KeyPrefix(chaosNamespace) + "lease"
	}
	return "asynq:{" + chaosQueue + "}:pending"
}

// planCluster draws a minute's cluster faults, each in its own part of
// the minute, away from the partition (5-15%) so each is seen on its own:
// a failover of the namespace's master, a resharding of the queue's slot,
// a failover of the queue's master, then a master killed.
func (h *chaosHarness) planCluster(minute time.Duration, at func(lo, hi int) time.Duration) []*chaosEvent {
	var evs []*chaosEvent
	if h.cfg.Faults["cluster_failover"] {
		evs = append(evs, &chaosEvent{at: at(22, 28), kind: "cluster_failover", target: clusterNamespace},
			&chaosEvent{at: at(55, 62), kind: "cluster_failover", target: clusterQueue})
	}
	if h.cfg.Faults["reshard"] {
		evs = append(evs, &chaosEvent{at: at(38, 45), kind: "reshard", target: clusterQueue})
	}
	if h.cfg.Faults["master_kill"] {
		target := clusterQueue
		if minute%2 == 1 {
			target = clusterNamespace
		}
		evs = append(evs, &chaosEvent{at: at(75, 82), kind: "master_kill", target: target})
	}
	return evs
}

// clusterFault starts a cluster fault in the background, after the one
// under way.
func (h *chaosHarness) clusterFault(ev *chaosEvent) {
	f := &h.clusterFaults
	f.running.Add(1)
	go func() {
		defer f.running.Done()
		f.mu.Lock()
		defer f.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		key := clusterKey(ev.target)
		// A graceful failover waits for the replica to catch up, and a
		// master killed before its replica has resynced (after the last
		// fault) would take the shard's data with it.
		if err := h.cluster.WaitSynced(ctx); err != nil {
			h.logf("%s of the %s's master skipped: %v", ev.kind, ev.target, err)
			return
		}
		switch ev.kind {
		case "cluster_failover":
			old, promoted, err := h.cluster.Failover(ctx, key)
			if err != nil {
				h.logf("CLUSTER FAILOVER of the %s's master failed: %v", ev.target, err)
				return
			}
			f.failovers++
			h.logf("CLUSTER FAILOVER of the %s's master: %s -> %s", ev.target, old.Addr, promoted.Addr)
		case "reshard":
			h.reshard(ctx, key)
		case "master_kill":
			killed, promoted, err := h.cluster.KillMasterOf(ctx, key)
			if killed == nil {
				h.logf("SIGKILL of the %s's master failed: %v", ev.target, err)
				return
			}
			f.masterKills++
			// asynq's own writes (a task taken, a task done) wait for no
			// replica: a task taken from the dead master may be pending
			// again on its successor (see nearSwitch).
			h.noteSwitch(time.Now())
			if err != nil {
				h.logf("SIGKILL of the %s's master %s: no successor seen: %v", ev.target, killed.Addr, err)
			} else {
				h.logf("SIGKILL of the %s's master %s; %s took over", ev.target, killed.Addr, promoted.Addr)
			}
			// Back, it rejoins as its successor's replica: the shard can
			// acknowledge writes again.
			killed.Start()
		}
	}()
}

// reshard moves the queue's slot to the master that holds neither it nor
// the namespace's, while per-second slots come due: the first batches
// each wait for a slot to come due meanwhile, so enqueues meet the slot
// half moved (ASK redirects, TRYAGAIN).
func (h *chaosHarness) reshard(ctx context.Context, key string) {
	to, err := h.cluster.OtherMaster(ctx, key, clusterKey(clusterNamespace))
	if err != nil {
		h.logf("resharding the queue's slot skipped: %v", err)
		return
	}
	batches := 0
	from, err := h.cluster.MigrateSlotOf(ctx, key, to, func() {
		if batches++; batches <= 2 {
			due := time.Now().Truncate(time.Second).Add(1100 * time.Millisecond)
			h.waitUntil(3*time.Second, "a slot due mid-move", func() bool { return time.Now().After(due) })
		}
	})
	if err != nil {
		h.logf("resharding the queue's slot failed after %d batches: %v", batches, err)
		return
	}
	h.clusterFaults.reshards++
	h.logf("resharded the queue's slot from %s to %s in %d batches", from.Addr, to.Addr, batches)
}

// clusterSummary is what the summary line adds on a cluster.
func (h *chaosHarness) clusterSummary(failoverReruns int) string {
	f := &h.clusterFaults
	f.mu.Lock()
	defer f.mu.Unlock()
	for kind, n := range map[string]int{"cluster_failover": f.failovers, "reshard": f.reshards, "master_kill": f.masterKills} {
		if h.cfg.Faults[kind] && n == 0 {
			h.t.Errorf("chaos: no %s happened", kind)
		}
	}
	return fmt.Sprintf(" engine=cluster replicas=%d duration_s=%d cluster_failovers=%d reshards=%d master_kills=%d failover_reruns=%d",
		h.cfg.Replicas, int(h.cfg.Duration.Seconds()), f.failovers, f.reshards, f.masterKills, failoverReruns)
}
