package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/belfry/belfry/internal/redistest"
	"github.com/belfry/belfry/runtime/internal/store"
	"github.com/redis/go-redis/v9"
)

// The cluster step runs the fire and spike measurements on a Redis Cluster
// of its own (redistest's: three masters, a replica each), with belfry on
// a cluster client and default options: its writes wait for a replica's
// acknowledgement, as a user's do. The namespace's slot is on one master
// and the queue's on another, so that every enqueue is fenced in the
// queue's slot and committed in the namespace's; asynq's Scheduler, the
// peer, enqueues into a queue on the same master as belfry's queue, in the
// same run. The nodes keep no AOF, as the single Redis of the other steps
// keeps none.

const (
	clusterMasters  = 3
	clusterReplicas = 1
)

type clusterResult struct {
	ran       bool
	fireSlots int
	place     clusterPlace
	fireFigures
	spikeN                         int
	spike                          time.Duration // median of the trials
	spikes                         []time.Duration
	spikeServiceCPU, spikeRedisCPU time.Duration // medians of the trials
	overlap                        bool          // the spike ran during the fire measurement
}

// clusterPlace says where the fire measurement's keys are.
type clusterPlace struct {
	nsSlot, queueSlot, asynqSlot int
	nsNode, queueNode, asynqNode string
}

func benchCluster(s settings, r *results) error {
	dir, err := os.MkdirTemp("", "belfry-bench-cluster-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	c, err := startCluster(dir, clusterMasters, clusterReplicas)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx := context.Background()
	if err := ready(ctx, c); err != nil {
		return err
	}
	res := &r.cluster
	res.ran, res.fireSlots, res.spikeN, res.overlap = true, s.clusterFireSlots, s.clusterSpike, s.clusterOverlap

	const ns = "bench-cluster-fire"
	res.place.nsSlot, res.place.nsNode, err = placeOf(ctx, c, store.KeyPrefix(ns)+"lease")
	if err != nil {
		return err
	}
	var queue, asynqQueue string
	queue, res.place.queueSlot, res.place.queueNode, err = pickName(ctx, c, "bench-cluster-fire-belfry",
		func(node string) bool { return node != res.place.nsNode })
	if err != nil {
		return err
	}
	asynqQueue, res.place.asynqSlot, res.place.asynqNode, err = pickName(ctx, c, "bench-cluster-fire-asynq",
		func(node string) bool { return node == res.place.queueNode })
	if err != nil {
		return err
	}
	// The quick run times its one small spike while the fire measurement
	// runs, to keep the smoke run short; the full run, one after the other.
	spiked := make(chan error, 1)
	if s.clusterOverlap {
		go func() { spiked <- clusterSpikes(ctx, c, s, res) }()
	}
	ours, theirs, err := fireSideBySide(fireSetup{newClient: clusterClient(c, 0), namespace: ns,
		belfryQueue: queue, asynqQueue: asynqQueue, slots: s.clusterFireSlots})
	if s.clusterOverlap {
		err = errors.Join(err, <-spiked)
	} else if err == nil {
		err = clusterSpikes(ctx, c, s, res)
	}
	if err != nil {
		return err
	}
	res.fireFigures = fireFiguresOf(ours, theirs)
	return nil
}

// clusterSpikes runs the spike trials, each with its namespace's slot and
// its queue's on different masters.
func clusterSpikes(ctx context.Context, c *redistest.Cluster, s settings, res *clusterResult) error {
	var serviceCPUs, redisCPUs []time.Duration
	for trial := range s.clusterSpikeTrials {
		ns := fmt.Sprintf("bench-cluster-spike-%d", trial)
		_, nsNode, err := placeOf(ctx, c, store.KeyPrefix(ns)+"lease")
		if err != nil {
			return err
		}
		queue, _, _, err := pickName(ctx, c, ns+"-q", func(node string) bool { return node != nsNode })
		if err != nil {
			return err
		}
		t, err := spikeTrial(spikeSetup{newClient: clusterClient(c, 32), redisCPU: clusterRedisCPU,
			namespace: ns, queue: queue, schedules: s.clusterSpike})
		if err != nil {
			return fmt.Errorf("spike trial %d: %w", trial+1, err)
		}
		res.spikes = append(res.spikes, t.spike)
		serviceCPUs = append(serviceCPUs, t.serviceCPU)
		redisCPUs = append(redisCPUs, t.redisCPU)
	}
	res.spike = percentile(res.spikes, 50)
	res.spikeServiceCPU, res.spikeRedisCPU = percentile(serviceCPUs, 50), percentile(redisCPUs, 50)
	return nil
}

func pendingKey(queue string) string { return "asynq:{" + queue + "}:pending" }

// placeOf is key's slot and the address of the master serving it.
func placeOf(ctx context.Context, c *redistest.Cluster, key string) (slot int, node string, err error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	master, _, err := c.MasterOf(ctx, key)
	if err != nil {
		return 0, "", err
	}
	slot, err = c.KeySlot(ctx, key)
	return slot, master.Addr, err
}

// pickName returns the first of prefix-0, prefix-1, … whose queue's slot
// is on a master ok accepts, with the slot and the master: the names are
// the same from run to run, and where they land is checked, not assumed.
func pickName(ctx context.Context, c *redistest.Cluster, prefix string, ok func(node string) bool) (name string, slot int, node string, err error) {
	for i := range 100 {
		name = fmt.Sprintf("%s-%d", prefix, i)
		if slot, node, err = placeOf(ctx, c, pendingKey(name)); err != nil {
			return "", 0, "", err
		}
		if ok(node) {
			return name, slot, node, nil
		}
	}
	return "", 0, "", fmt.Errorf("no queue %s-N of 100 lands on the master wanted", prefix)
}

// clusterClient makes cluster clients of c with go-redis's defaults, as a
// user's are, but the pool size if not 0.
func clusterClient(c *redistest.Cluster, poolSize int) func() redis.UniversalClient {
	return func() redis.UniversalClient {
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), PoolSize: poolSize})
	}
}

// clusterRedisCPU is the CPU time every node of rdb's cluster has used,
// masters and replicas: a replica applies each write too.
func clusterRedisCPU(ctx context.Context, rdb redis.UniversalClient) (time.Duration, error) {
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		return 0, fmt.Errorf("a %T is not a cluster client", rdb)
	}
	var mu sync.Mutex
	var total time.Duration
	err := cc.ForEachShard(ctx, func(ctx context.Context, node *redis.Client) error {
		cpu, err := redisCPU(ctx, node)
		mu.Lock()
		total += cpu
		mu.Unlock()
		return err
	})
	return total, err
}

// ready turns the nodes' AOF off (redistest's servers keep one for tests
// that restart them, the bench's single Redis keeps none, and the two are
// compared) and waits until every replica is in sync, without which
// belfry, waiting for a replica's acknowledgement, would not lead.
func ready(ctx context.Context, c *redistest.Cluster) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for _, p := range c.Nodes {
		rdb := redis.NewClient(&redis.Options{Network: "unix", Addr: p.Socket})
		err := rdb.ConfigSet(ctx, "appendonly", "no").Err()
		rdb.Close()
		if err != nil {
			return fmt.Errorf("node %s: CONFIG SET appendonly no: %w", p.Addr, err)
		}
	}
	return c.WaitSynced(ctx)
}

// startCluster starts redistest's cluster in dir. The harness reports a
// failure through a TB, as to a test; here Fatalf panics with it, and
// startCluster returns it as its error.
func startCluster(dir string, masters, replicas int) (c *redistest.Cluster, err error) {
	defer func() {
		if p := recover(); p != nil {
			f, ok := p.(harnessFailure)
			if !ok {
				panic(p)
			}
			err = f.err
		}
	}()
	return redistest.NewCluster(harnessTB{}, dir, masters, replicas), nil
}

// harnessTB is the redistest.TB of the bench's cluster (startCluster).
type harnessTB struct{}

type harnessFailure struct{ err error }

func (harnessTB) Helper() {}

func (harnessTB) Fatalf(format string, args ...any) {
	panic(harnessFailure{fmt.Errorf("redis cluster: "+format, args...)})
}

func (c *clusterResult) print(w io.Writer) {
	if !c.ran {
		return
	}
	p := c.place
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "Redis Cluster, %d masters with %d replica each, default options\tbelfry\tasynq Scheduler\ttarget\n", clusterMasters, clusterReplicas)
	fmt.Fprintf(tw, "where: namespace's slot / queue's slot (master)\t%d (%s) / %d (%s)\t%d (%s)\tnamespace and queue apart\n",
		p.nsSlot, p.nsNode, p.queueSlot, p.queueNode, p.asynqSlot, p.asynqNode)
	fmt.Fprintf(tw, "fire latency of a per-second schedule, %d slots (p50 / p99; slowest)\t%s / %s; %s\t%s / %s; %s\tbelfry p99 <= asynq p99 + 5 ms\n",
		c.fireSlots, ms(c.fireP50), ms(c.fireP99), durationsMs(c.fireTop), ms(c.asynqP50), ms(c.asynqP99), durationsMs(c.asynqTop))
	during := ""
	if c.overlap {
		during = ", during the fire measurement (quick run)"
	}
	fmt.Fprintf(tw, "%d due at once (queue and namespace apart)%s, median\t%.3f s (%s)\t\t<= 0.5 s\n", c.spikeN, during, c.spike.Seconds(), durations(c.spikes))
	fmt.Fprintf(tw, "that spike, CPU median\tservice %.3f s, Redis (every node) %.3f s\t\t\n", c.spikeServiceCPU.Seconds(), c.spikeRedisCPU.Seconds())
	tw.Flush()
}

// summary is the step's keys of the bench line.
func (c *clusterResult) summary() string {
	if !c.ran {
		return ""
	}
	return fmt.Sprintf(" cluster_fire_p99_ms=%.1f asynq_cluster_fire_p99_ms=%.1f cluster_spike10k_s=%.2f",
		msf(c.fireP99), msf(c.asynqP99), c.spike.Seconds())
}
