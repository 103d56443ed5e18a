package runtime_test

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/belfry/belfry/internal/redistest"
	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
	"github.com/belfry/belfry/runtime/internal/store"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// A runtime on a cluster client of a real Redis Cluster schedules: New
// takes a *redis.ClusterClient and a cluster UniversalClient, a per-second
// schedule runs each of its slots once, with the namespace's keys on one
// master and the queue's on another. The cluster's masters have no
// replicas, so by default (writes wait for one replica's acknowledgement
// on a cluster client) the runtime does not lead and says why; told to
// wait for none (ReplicaAcksOff), it runs.
func TestRuntimeRunsOnRedisCluster(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cluster := redistest.StartCluster(t, 3)
	ns, queue := apartInCluster(t, ctx, cluster)

	t.Run("by default it waits for replicas the masters lack, and says so", func(t *testing.T) {
		reg := registry.MustNew(idleSchedule())
		rt, err := runtime.New(reg, runtime.Options{Redis: cluster.Client(t), Namespace: uniq("ns"), LeaseTTL: time.Second, Logger: failoverLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		runUntilTheEnd(t, rt)
		waitFor(t, 10*time.Second, "the refusal", func() bool { return strings.Contains(rt.Redis().Unsafe(), "too few Redis replicas") })
		h := rt.Health(ctx)
		if h.Status == "ok" || !strings.Contains(strings.Join(h.Problems, "\n"), "ReplicaAcksOff") {
			t.Errorf("health %+v; want unhealthy, saying how to lead without replicas", h)
		}
		if h.Leader != "" {
			t.Errorf("health names leader %q; want none", h.Leader)
		}
	})
	runs := newTaskRuns()
	reg := registry.MustNew(registry.Schedule{Name: "tick", Expr: "* * * * * *", Queue: queue, Handler: runs.handler})

	universal := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: cluster.Addrs()})
	t.Cleanup(func() { universal.Close() }) // after the runtimes' (cleanups run last-in first-out)
	if _, ok := universal.(*redis.ClusterClient); !ok {
		t.Fatalf("NewUniversalClient with %d addresses made a %T", len(cluster.Addrs()), universal)
	}
	var rts []*runtime.Runtime
	for i, client := range []redis.UniversalClient{cluster.Client(t), universal} {
		rt, err := runtime.New(reg, runtime.Options{Redis: client, Namespace: ns, Replica: "r" + strconv.Itoa(i),
			LeaseTTL: 2 * time.Second, Logger: failoverLogger(t), ReplicaAcks: runtime.ReplicaAcksOff})
		if err != nil {
			t.Fatalf("New with a %T: %v", client, err)
		}
		runUntilTheEnd(t, rt)
		rts = append(rts, rt)
	}
	startWorker(t, cluster.Client(t), queue, func(mux *asynq.ServeMux) { rts[0].RegisterHandlers(mux) })
	start := time.Now()
	rig := &failoverRig{t: t, rts: rts, runs: runs, schedule: "tick", reg: reg}
	rig.waitRun(20*time.Second, start.Add(6*time.Second))
	from, to := firstRun(t, runs, "tick").Add(time.Second), start.Add(6*time.Second)
	if dup, missed, _ := rig.verdict(ctx, from, to); dup != 0 || missed != 0 {
		t.Errorf("on a cluster: %d duplicates, %d missed; want each slot once", dup, missed)
	}
	for _, rt := range rts {
		if state, err := rt.Redis().State(); state != runtime.RedisUp || rt.Redis().Unsafe() != "" {
			t.Errorf("Redis %s (%v), unsafe %q; want up and safe", state, err, rt.Redis().Unsafe())
		}
	}
	if h := rts[0].Health(ctx); h.Status != "ok" || h.Leader == "" {
		t.Errorf("health %+v; want ok, with a leader", h)
	}
}

// apartInCluster returns a namespace and a queue whose slots are on two
// different masters of c, so that a script touching both would be
// refused.
func apartInCluster(t *testing.T, ctx context.Context, c *redistest.Cluster) (ns, queue string) {
	t.Helper()
	ns = uniq("ns")
	return ns, queueApart(t, ctx, c, ns, func(int) string { return uniq("q") })
}

// queueApart returns the first of the queue names name(0), name(1), …
// whose slot is on another master of c than namespace ns's.
func queueApart(t *testing.T, ctx context.Context, c *redistest.Cluster, ns string, name func(i int) string) string {
	t.Helper()
	nsMaster, _, err := c.MasterOf(ctx, store.KeyPrefix(ns)+"lease")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		queue := name(i)
		if m, _, err := c.MasterOf(ctx, "asynq:{"+queue+"}:pending"); err != nil {
			t.Fatal(err)
		} else if m != nsMaster {
			return queue
		}
	}
	t.Fatal("no queue name found whose slot is on another master than the namespace's")
	return ""
}

// firstRun is the earliest slot of schedule that ran.
func firstRun(t *testing.T, runs *taskRuns, schedule string) time.Time {
	t.Helper()
	bySlot, _ := runs.bySlot(schedule)
	var first int64
	for slot := range bySlot {
		if first == 0 || slot < first {
			first = slot
		}
	}
	if first == 0 {
		t.Fatal("nothing ran")
	}
	return time.Unix(first, 0)
}

// What cannot work on a cluster is a configuration error said plainly: a
// plain client of one cluster node (which follows no MOVED redirect), and a
// Redis that answers CROSSSLOT (a proxy that is not cluster-aware). The
// runtime reports it once and does not lead, instead of flapping between
// "unreachable" and "reachable again" with health saying Redis is up.
func TestRedisClusterWithoutAClusterClientIsRefused(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cluster := redistest.StartCluster(t, 3)
	reg := registry.MustNew(idleSchedule())

	t.Run("a plain client of a cluster node", func(t *testing.T) {
		node := redis.NewClient(&redis.Options{Addr: cluster.Addrs()[0]})
		defer node.Close()
		var logs syncBuffer
		rt, err := runtime.New(reg, runtime.Options{Redis: node, Namespace: uniq("ns"), LeaseTTL: time.Second,
			Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		runUntilTheEnd(t, rt)
		waitFor(t, 10*time.Second, "the refusal", func() bool { return strings.Contains(logs.String(), "will not schedule on this Redis") })
		// A few lease periods: a flapping runtime logs again in each.
		deadline := time.Now().Add(3 * time.Second)
		waitFor(t, 5*time.Second, "three lease periods", func() bool { return time.Now().After(deadline) })
		assertClusterRefused(t, ctx, rt, logs.String())
	})

	t.Run("a CROSSSLOT reply", func(t *testing.T) {
		node := redis.NewClient(&redis.Options{Addr: cluster.Addrs()[0]})
		defer node.Close()
		crossSlot := node.MGet(ctx, "a", "b").Err()
		if crossSlot == nil || !strings.HasPrefix(crossSlot.Error(), "CROSSSLOT") {
			t.Fatalf("MGET a b on a cluster node: %v; want CROSSSLOT", crossSlot)
		}
		var logs syncBuffer
		rt, err := runtime.New(reg, runtime.Options{Redis: sharedRedis(t), Namespace: uniq("ns"),
			Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		defer rt.Close()
		for range 3 {
			rt.NoteRedis(crossSlot)
		}
		if !strings.Contains(rt.Redis().Unsafe(), "CROSSSLOT") {
			t.Errorf("RedisUnsafe %q; want it to quote the CROSSSLOT reply", rt.Redis().Unsafe())
		}
		assertClusterRefused(t, ctx, rt, logs.String())
	})

	t.Run("a MOVED through a cluster client is a moment of change", func(t *testing.T) {
		node := redis.NewClient(&redis.Options{Addr: cluster.Addrs()[0]})
		defer node.Close()
		var moved error
		for i := 0; moved == nil || !strings.HasPrefix(moved.Error(), "MOVED"); i++ {
			if i == 100 {
				t.Fatalf("no key of 100 is on another node than %s: %v", cluster.Addrs()[0], moved)
			}
			moved = node.Get(ctx, "k"+strconv.Itoa(i)).Err()
		}
		rt, err := runtime.New(reg, runtime.Options{Redis: cluster.Client(t), Namespace: uniq("ns")})
		if err != nil {
			t.Fatal(err)
		}
		defer rt.Close()
		rt.NoteRedis(moved)
		if unsafe := rt.Redis().Unsafe(); unsafe != "" {
			t.Errorf("a %q through a cluster client taken for a configuration error: %s", moved, unsafe)
		}
	})
}

// A Redis Cluster answering that it cannot serve for now — TRYAGAIN while
// a slot moves between masters, CLUSTERDOWN while a slot has no master —
// is named as that in the log (and so in health), not as Redis unreachable,
// and is no configuration error: the runtime does not refuse the cluster,
// and says when it serves again.
func TestRedisClusterUnavailableIsNamedAsSuch(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cluster := redistest.StartCluster(t, 3)
	rdb := cluster.Client(t)
	var logs syncBuffer
	rt, err := runtime.New(registry.MustNew(idleSchedule()), runtime.Options{Redis: rdb, Namespace: uniq("ns"),
		ReplicaAcks: runtime.ReplicaAcksOff, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	notConfig := func(what string) {
		t.Helper()
		if unsafe := rt.Redis().Unsafe(); unsafe != "" {
			t.Errorf("%s taken for a configuration error: %s", what, unsafe)
		}
		if strings.Contains(logs.String(), "unreachable") || strings.Contains(logs.String(), "configuration error") {
			t.Errorf("%s logged as Redis unreachable or a configuration error:\n%s", what, logs.String())
		}
	}

	// TRYAGAIN: a command over keys of a moving slot, some moved already.
	keys := make([]string, 12)
	for i := range keys {
		keys[i] = "{moving}k" + strconv.Itoa(i)
		if err := rdb.Set(ctx, keys[i], "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	source, _, err := cluster.MasterOf(ctx, keys[0])
	if err != nil {
		t.Fatal(err)
	}
	target := cluster.Masters[0]
	if target == source {
		target = cluster.Masters[1]
	}
	var tryAgain error
	if _, err := cluster.MigrateSlotOf(ctx, keys[0], target, func() {
		if tryAgain == nil {
			tryAgain = rdb.MGet(ctx, keys...).Err()
		}
	}); err != nil {
		t.Fatal(err)
	}
	if tryAgain == nil || !strings.HasPrefix(tryAgain.Error(), "TRYAGAIN") {
		t.Fatalf("MGET over a moving slot's keys: %v; want TRYAGAIN", tryAgain)
	}
	rt.NoteRedis(fmt.Errorf("reading the cursors: %w", tryAgain))
	if !strings.Contains(logs.String(), `msg="redis cluster reconfiguring (TRYAGAIN: a slot is moving between masters); retrying with backoff"`) {
		t.Errorf("TRYAGAIN not named as the cluster reconfiguring:\n%s", logs.String())
	}
	notConfig("TRYAGAIN")
	rt.NoteRedis(nil)
	if !strings.Contains(logs.String(), `msg="redis serving again"`) || !strings.Contains(logs.String(), ` was="redis cluster reconfiguring`) {
		t.Errorf("the end of TRYAGAIN not logged as Redis serving again:\n%s", logs.String())
	}

	// CLUSTERDOWN: a master lost, with no replica to take its slots over,
	// as a node that still runs answers.
	cluster.Masters[2].Kill()
	live := cluster.Masters[0].Client(t)
	var down error
	waitFor(t, 20*time.Second, "the cluster to answer CLUSTERDOWN", func() bool {
		down = live.Get(ctx, keys[0]).Err()
		return down != nil && strings.HasPrefix(down.Error(), "CLUSTERDOWN")
	})
	rt.NoteRedis(fmt.Errorf("renewing the lease: %w", down))
	if !strings.Contains(logs.String(), `msg="redis cluster unavailable (CLUSTERDOWN); retrying with backoff"`) {
		t.Errorf("CLUSTERDOWN not named as the cluster unavailable:\n%s", logs.String())
	}
	notConfig("CLUSTERDOWN")
}

// assertClusterRefused checks what a runtime that met a cluster without a
// cluster client says: one log line, no "unreachable", Redis up, no
// lease, and health naming the configuration error and the remedy.
func assertClusterRefused(t *testing.T, ctx context.Context, rt *runtime.Runtime, logs string) {
	t.Helper()
	if n := strings.Count(logs, "will not schedule on this Redis"); n != 1 || !strings.Contains(logs, "configuration error") {
		t.Errorf("the refusal logged %d times, want once, as a configuration error:\n%s", n, logs)
	}
	if strings.Contains(logs, "unreachable") || strings.Contains(logs, "reachable again") {
		t.Errorf("a cluster taken for an outage:\n%s", logs)
	}
	if state, err := rt.Redis().State(); state != runtime.RedisUp {
		t.Errorf("Redis %s (%v); want up: it answers, and refuses", state, err)
	}
	if rt.Leadership().Leading() {
		t.Error("the runtime leads on a Redis Cluster without a cluster client")
	}
	h := rt.Health(ctx)
	problems := strings.Join(h.Problems, "; ")
	if h.Status != "unhealthy" || !strings.Contains(problems, "configuration error: a Redis Cluster reached without a cluster client") ||
		!strings.Contains(problems, "redis.NewClusterClient") || strings.Contains(problems, "unreachable") {
		t.Errorf("health %+v; want unhealthy, naming the configuration error and the cluster client to use", h)
	}
}

// clusterRig is a failoverRig on a Redis Cluster with a replica per
// master: three runtimes and two asynq workers, each on a cluster client
// of its own, running a per-second schedule whose queue's slot is on
// another master than the namespace's.
type clusterRig struct {
	*failoverRig
	cluster *redistest.Cluster
}

func newClusterRig(t *testing.T, ctx context.Context, opts runtime.Options) *clusterRig {
	t.Helper()
	c := redistest.StartClusterWithReplicas(t, 3, 1)
	ns, queue := apartInCluster(t, ctx, c)
	rig := &clusterRig{cluster: c, failoverRig: &failoverRig{t: t, ns: ns, queue: queue, schedule: "tick",
		runs: newTaskRuns()}}
	reg := registry.MustNew(registry.Schedule{Name: rig.schedule, Expr: "* * * * * *", Queue: queue, Handler: rig.runs.handler})
	rig.reg = reg
	for i := range 3 {
		o := opts
		o.Redis, o.Namespace, o.Replica, o.LeaseTTL, o.Logger = c.Client(t), ns, "r"+strconv.Itoa(i), 2*time.Second, failoverLogger(t)
		rt, err := runtime.New(reg, o)
		if err != nil {
			t.Fatal(err)
		}
		rig.rts = append(rig.rts, rt)
	}
	for range 2 {
		startWorker(t, c.Client(t), queue, func(mux *asynq.ServeMux) { rig.rts[0].RegisterHandlers(mux) })
	}
	rig.run()
	return rig
}

// nsKey and queueKey are keys in the namespace's slot and the queue's.
func (rig *clusterRig) nsKey() string    { return store.KeyPrefix(rig.ns) + "lease" }
func (rig *clusterRig) queueKey() string { return "asynq:{" + rig.queue + "}:pending" }

// CLUSTER FAILOVER of the master holding the namespace's slot, then of the
// one holding the queue's, while per-second slots come due: each slot
// runs once, counted from the handlers.
func TestRedisClusterFailoversRunEverySlotOnce(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rig := newClusterRig(t, ctx, runtime.Options{})
	rig.leader()
	start := time.Now()
	rig.waitRun(15*time.Second, start)
	from := firstRun(t, rig.runs, rig.schedule).Add(time.Second)
	for _, key := range []string{rig.nsKey(), rig.queueKey()} {
		rig.waitRun(15*time.Second, time.Now().Add(time.Second))
		if err := rig.cluster.WaitSynced(ctx); err != nil {
			t.Fatal(err)
		}
		old, promoted, err := rig.cluster.Failover(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("CLUSTER FAILOVER of the master of %s: %s -> %s", key, old.Addr, promoted.Addr)
	}
	to := time.Now().Add(2 * time.Second)
	if dup, missed, _ := rig.verdict(ctx, from, to); dup != 0 || missed != 0 {
		t.Errorf("through two cluster failovers: %d duplicates, %d missed; want each slot once", dup, missed)
	}
}

// Resharding the queue's slot to another master (CLUSTER SETSLOT
// MIGRATING/IMPORTING and MIGRATE, a few keys at a time) while its
// per-second schedule enqueues: enqueues meet ASK redirects and TRYAGAIN
// mid-move, and each slot still runs once. Long (make test/long).
func TestRedisClusterReshardingAQueueSlotRunsEverySlotOnce(t *testing.T) {
	if !*longFlag {
		t.Skip("a long test: -long (make test/long)")
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rig := newClusterRig(t, ctx, runtime.Options{})
	rig.leader()
	rig.waitRun(15*time.Second, time.Now())
	from := firstRun(t, rig.runs, rig.schedule).Add(time.Second)
	source, _, err := rig.cluster.MasterOf(ctx, rig.queueKey())
	if err != nil {
		t.Fatal(err)
	}
	var target *redistest.Private
	for _, m := range rig.cluster.Masters {
		if role, _, _ := rig.cluster.MasterOf(ctx, rig.nsKey()); m != source && m != role {
			target = m
		}
	}
	if target == nil {
		t.Fatal("no master other than the queue's and the namespace's")
	}
	// While the slot's keys are on both sides, an enqueue's script is
	// refused (TRYAGAIN) and retried: the first batches wait for a slot
	// to come due meanwhile, the rest move at once.
	batches := 0
	moved, err := rig.cluster.MigrateSlotOf(ctx, rig.queueKey(), target, func() {
		if batches++; batches <= 2 {
			due := time.Now().Truncate(time.Second).Add(1100 * time.Millisecond)
			waitFor(t, 3*time.Second, "a slot due mid-move", func() bool { return time.Now().After(due) })
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("moved the queue's slot from %s to %s in %d batches", moved.Addr, target.Addr, batches)
	to := time.Now().Add(2 * time.Second)
	if dup, missed, _ := rig.verdict(ctx, from, to); dup != 0 || missed != 0 {
		t.Errorf("through a resharding of the queue's slot: %d duplicates, %d missed; want each slot once", dup, missed)
	}
}

// A master SIGKILLed, the namespace's then the queue's, each replaced by
// its replica after cluster-node-timeout and then restarted (it rejoins as
// a replica), with ReplicaAcks 1 so that no write counted was only on the
// dead master: each slot outside a loss the runtimes detected runs once.
// Long (make test/long).
func TestRedisClusterMastersKilledRunEverySlotOnce(t *testing.T) {
	if !*longFlag {
		t.Skip("a long test: -long (make test/long)")
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rig := newClusterRig(t, ctx, runtime.Options{ReplicaAcks: 1})
	rig.leader()
	rig.waitRun(15*time.Second, time.Now())
	from := firstRun(t, rig.runs, rig.schedule).Add(time.Second)
	for _, key := range []string{rig.nsKey(), rig.queueKey()} {
		rig.waitRun(20*time.Second, time.Now().Add(time.Second))
		if err := rig.cluster.WaitSynced(ctx); err != nil {
			t.Fatal(err)
		}
		killed, promoted, err := rig.cluster.KillMasterOf(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("SIGKILL of the master of %s: %s, replaced by %s", key, killed.Addr, promoted.Addr)
		// Back, it rejoins as its successor's replica: the shard can
		// acknowledge writes again.
		killed.Start()
	}
	to := time.Now().Add(2 * time.Second)
	if dup, missed, _ := rig.verdict(ctx, from, to); dup != 0 || missed != 0 {
		t.Errorf("through two masters killed: %d duplicates, %d missed; want each slot once", dup, missed)
	}
}
