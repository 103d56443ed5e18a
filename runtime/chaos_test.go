package runtime_test

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/belfry/belfry/runtime/internal/store"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/belfry/belfry/internal/redistest"
	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
	"github.com/belfry/belfry/runtime/checkpoint"
	"github.com/belfry/belfry/runtime/internal/chaoskit"
	"github.com/belfry/belfry/runtime/internal/clock"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// The chaos harness is opt-in: it takes minutes and starts processes, so it
// runs only under `make chaos`, never in `go test ./...`.
var (
	chaosFlag    = flag.Bool("chaos", false, "run the chaos harness (make chaos)")
	chaosSummary = flag.String("chaos.summary", "", "also write the chaos summary line to this file")
)

// A replica process is this test binary re-executed with these variables
// set; TestChaosReplica then runs a replica instead of a test.
const (
	envReplica = "BELFRY_CHAOS_REPLICA"
	envSocket  = "BELFRY_CHAOS_SOCKET"
	// envAddr, when set, is the replica's own fault proxy in front of
	// Redis (host:port); the replica then reaches Redis only through it.
	envAddr = "BELFRY_CHAOS_ADDR"
	// envAcks "true" has the replica's writes wait for one Redis replica's
	// acknowledgement (the Sentinel topology).
	envAcks   = "BELFRY_CHAOS_ACKS"
	envOffset = "BELFRY_CHAOS_OFFSET"
	envRecord = "BELFRY_CHAOS_RECORD"
	envTTL    = "BELFRY_CHAOS_TTL"
	envGrace  = "BELFRY_CHAOS_GRACE"
	envSkew   = "BELFRY_CHAOS_SKEW_MARGIN"
	// envBatchItems is the size of the checkpointed long job.
	envBatchItems = "BELFRY_CHAOS_BATCH_ITEMS"
	// envCluster, when set, has the replica use a cluster client whose
	// connection to each node goes through the replica's own proxy of it
	// (redistest.ClusterLink.Routes); envQueue is then the queue.
	envCluster = "BELFRY_CHAOS_CLUSTER"
	envQueue   = "BELFRY_CHAOS_QUEUE"
)

const chaosNamespace = "chaos"

// chaosQueue is the schedules' queue. On a cluster the harness picks one
// whose slot is on another master than the namespace's (the hash tags
// "{chaos}" of both would put them in one slot) and tells the replicas
// (envQueue).
var chaosQueue = "chaos"

// chaosSchedules are what every replica serves and what the harness counts.
// The per-second ones make a lost or doubled slot visible within a second of
// any fault; batch runs the checkpointed long job (chaoskit.BatchSchedule).
func chaosSchedules(h, batch registry.HandlerFunc) *registry.Registry {
	exprs := []struct{ name, expr string }{
		{"every-1s", "* * * * * *"},
		{"every-2s", "*/2 * * * * *"},
		{"every-5s", "*/5 * * * * *"},
		{"every-1m", "* * * * *"},
	}
	var scheds []registry.Schedule
	for _, e := range exprs {
		scheds = append(scheds, registry.Schedule{Name: e.name, Expr: e.expr, Queue: chaosQueue,
			Timeout: 10 * time.Second, MaxRetry: 5, Handler: h})
	}
	scheds = append(scheds, chaosFamilySchedule(h), registry.Schedule{Name: chaoskit.BatchSchedule, Expr: chaoskit.BatchExpr,
		Queue: chaosQueue, Timeout: chaoskit.BatchTimeout, MaxRetry: 25, Handler: batch})
	return registry.MustNew(scheds...)
}

// TestChaosReplica is the body of a replica process; run directly it skips.
func TestChaosReplica(t *testing.T) {
	name := os.Getenv(envReplica)
	if name == "" {
		t.Skip("replica process of TestChaos; runs only when TestChaos starts it")
	}
	if err := runChaosReplica(name); err != nil {
		t.Fatal(err)
	}
}

func runChaosReplica(name string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if q := os.Getenv(envQueue); q != "" {
		chaosQueue = q
	}
	offset, err := time.ParseDuration(os.Getenv(envOffset))
	if err != nil {
		return fmt.Errorf("%s: %v", envOffset, err)
	}
	ttl, err := time.ParseDuration(os.Getenv(envTTL))
	if err != nil {
		return fmt.Errorf("%s: %v", envTTL, err)
	}
	grace, err := time.ParseDuration(os.Getenv(envGrace))
	if err != nil {
		return fmt.Errorf("%s: %v", envGrace, err)
	}
	skewMargin, err := time.ParseDuration(os.Getenv(envSkew))
	if err != nil {
		return fmt.Errorf("%s: %v", envSkew, err)
	}
	// One file per process, appended with one write per execution: it
	// survives Redis restarts and a SIGKILL (the page cache is the kernel's),
	// so the count does not depend on anything the runtime writes. A line
	// is "<name> <slot> <retry> <replica> <pid> <began, Unix ns>".
	rec, err := os.OpenFile(os.Getenv(envRecord), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer rec.Close()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	items, err := strconv.Atoi(os.Getenv(envBatchItems))
	if err != nil {
		return fmt.Errorf("%s: %v", envBatchItems, err)
	}
	blog, err := chaoskit.OpenBatchLog(filepath.Dir(os.Getenv(envRecord)), name)
	if err != nil {
		return err
	}
	defer blog.Close()
	pid := os.Getpid()
	reg := chaosSchedules(func(ctx context.Context, occ registry.Occurrence) error {
		retry, _ := asynq.GetRetryCount(ctx)
		line := fmt.Sprintf("%s %d %d %s %d %d\n", chaosRecordName(occ), occ.Slot.Unix(), retry, name, pid, time.Now().UnixNano())
		if _, err := rec.WriteString(line); err != nil {
			log.Error("chaos: recording an execution failed; the count will be short", "occ", occ.ID, "err", err)
		}
		return nil // every execution counts, so none is retried for failing
	}, batchHandler(blog, items))

	var rdb redis.UniversalClient
	if routes := os.Getenv(envCluster); routes != "" {
		if rdb, err = redistest.RoutedClusterClient(routes, redis.ClusterOptions{
			DialTimeout: 200 * time.Millisecond, ReadTimeout: time.Second, WriteTimeout: time.Second}); err != nil {
			return err
		}
	} else {
		ropts := &redis.Options{Network: "unix", Addr: os.Getenv(envSocket),
			DialTimeout: 200 * time.Millisecond, ReadTimeout: time.Second, WriteTimeout: time.Second}
		if addr := os.Getenv(envAddr); addr != "" {
			ropts.Network, ropts.Addr = "tcp", addr
		}
		rdb = redis.NewClient(ropts)
	}
	defer rdb.Close()
	enq, err := recordEnqueues(rdb, os.Getenv(envEnqueues), func(err error) {
		log.Error("chaos: recording an enqueue failed; the diagnosis will be short", "err", err)
	})
	if err != nil {
		return err
	}
	defer enq.Close()
	// One replica's acknowledgement, waited for at most a quarter of the
	// lease (the option must stay below a lease call's TTL/3 bound). On a
	// cluster client the defaults hold: one replica's, as a user gets it.
	acks, ackTimeout := 0, time.Duration(0)
	if os.Getenv(envAcks) == "true" {
		acks, ackTimeout = 1, ttl/4
	}
	rt, err := runtime.NewWithClock(reg, runtime.Options{Redis: rdb, Namespace: chaosNamespace, Replica: name,
		LeaseTTL: ttl, Grace: grace, SkewMargin: skewMargin, Logger: log, ReplicaAcks: acks, ReplicaAckTimeout: ackTimeout}, clock.Offset(offset))
	if err != nil {
		return err
	}
	defer rt.Close()
	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{
		Queues: map[string]int{chaosQueue: 1}, Concurrency: 8,
		TaskCheckInterval: 100 * time.Millisecond, DelayedTaskCheckInterval: time.Second,
		// A task orphaned by a SIGKILLed worker comes back as a retry; run it
		// soon so the drain does not wait for asynq's default backoff.
		RetryDelayFunc:  func(int, error, *asynq.Task) time.Duration { return time.Second },
		ShutdownTimeout: 5 * time.Second,
		Logger:          runtime.AsynqLogger(log.With("component", "asynq")), LogLevel: asynq.WarnLevel,
	})
	mux := asynq.NewServeMux()
	rt.RegisterHandlers(mux)
	if err := srv.Start(mux); err != nil {
		return err
	}
	log.Info("chaos replica up", "pid", pid, "clock_offset", offset)
	runErr := rt.Run(ctx)
	srv.Shutdown()
	log.Info("chaos replica down", "pid", pid)
	return runErr
}

// batchHandler is the long job's handler on Redis: each batch's effect is
// its line in the replica's log, written before checkpoint.Run saves the
// cursor, so a crash between the two processes the batch again (at least
// once per batch).
func batchHandler(blog *chaoskit.BatchLog, items int) registry.HandlerFunc {
	return func(ctx context.Context, occ registry.Occurrence) error {
		blog.Attempt()
		err := checkpoint.Run(ctx, chaoskit.BatchStep(items, func(_ context.Context, from, to int) error {
			return blog.Batch(from, to)
		}))
		if err == nil {
			blog.Done()
		}
		return err
	}
}

// chaosFaults are the fault kinds CHAOS_FAULTS selects from (a comma
// list; by default every one):
//
//	kill       SIGKILL the leader, restart it shortly after
//	pause      SIGSTOP the leader for longer than its lease (a zombie)
//	freeze     SIGSTOP the leader for just under its lease (CHAOS_STALL=0 drops it too)
//	restart    stop Redis cleanly and start it again from its AOF
//	flush      FLUSHALL: Redis loses every key (a data-loss event)
//	partition  black-hole the leader's link to Redis for several TTLs, then heal it
//	           (what was sent into the partition is delivered late)
//	latency    delay every reply to the leader by TTL/8 to TTL/4 for 15-25 s
//	stall      DEBUG SLEEP: Redis stops answering everyone for TTL/2 to 2 TTL
//	failover   SENTINEL FAILOVER to the replica; with it the run uses a primary, a
//	           replica and three sentinels, and the replicas use ReplicaAcks=1
var chaosFaults = []string{"kill", "pause", "freeze", "restart", "flush", "partition", "latency", "stall", "failover"}

// chaosConfigFromEnv is the run's settings among kinds (chaosFaults or
// chaosClusterFaults); CHAOS_STALL=0 drops freeze.
func chaosConfigFromEnv(t *testing.T, kinds []string) chaoskit.Config {
	t.Helper()
	c := chaoskit.FromEnv(t, kinds)
	if os.Getenv("CHAOS_STALL") == "0" {
		c.Faults["freeze"] = false
	}
	return c
}

// chaosReplica is one replica slot; each restart is a new process (a new
// incarnation with its own name, log and record file).
type chaosReplica struct {
	chaoskit.Proc
	idx         int
	incarnation int
	offset      time.Duration
	// proxy is this replica slot's own link to Redis, kept across
	// incarnations, so a network fault hits exactly one replica; link is
	// the same on a cluster, a proxy per node.
	proxy *redistest.Proxy
	link  *redistest.ClusterLink
}

// cut black-holes the replica's link to Redis (every node of a cluster).
func (r *chaosReplica) cut() {
	if r.link != nil {
		r.link.BlackHole()
		return
	}
	r.proxy.BlackHole()
}

// delay holds the replica's replies from Redis for d (0 removes it).
func (r *chaosReplica) delay(d time.Duration) {
	if r.link != nil {
		r.link.Delay(d)
		return
	}
	r.proxy.Delay(d)
}

// heal ends cut.
func (r *chaosReplica) heal() {
	if r.link != nil {
		r.link.Pass()
		return
	}
	r.proxy.Pass()
}

type chaosHarness struct {
	t   *testing.T
	cfg chaoskit.Config
	dir string
	exe string
	// redis is the Redis the replicas use; with a Sentinel topology the
	// server that started as its primary (primary() says which is now).
	redis    *redistest.Private
	sentinel *redistest.Sentinel
	// cluster, when set, is the Redis Cluster the replicas use instead
	// (CHAOS_ENGINE=cluster), and clusterFaults its faults.
	cluster       *redistest.Cluster
	clusterFaults clusterFaults
	rdb           redis.UniversalClient
	replicas      []*chaosReplica
	// chaosStart is the origin of the fault schedule's offsets.
	chaosStart time.Time
	// schedules are the registry's schedules that are not families.
	schedules []string

	kills, pauses, freezes, redisRestarts, flushes int
	partitions, latencies, stalls, failovers       int
	// operator is a runtime of the harness's own, never run: it pauses and
	// resumes as an operator would and reads the detected losses.
	operator *runtime.Runtime
	// operatorPause is when an operator paused and resumed chaosPaused:
	// each from its first attempt (one that timed out may have landed) to
	// the one that succeeded.
	operatorPause struct{ fromFirst, from, toFirst, to time.Time }
	// failover, when set, makes a Sentinel failover of the primary and
	// counts it; nil without the sentinel topology.
	failover func(*chaosHarness)
	// switches are when the primary changed (a failover the harness made,
	// or one Sentinel made on its own, e.g. during a stall), as seen.
	switchMu sync.Mutex
	switches []time.Time
	// lostSeen are the losses the replicas recorded, as the harness saw
	// them during the run (see noteLost).
	lostMu   sync.Mutex
	lostSeen []runtime.LostWrites
	// flushLog are the harness's FLUSHALLs, with what each took.
	flushLog []chaosFlush
	// batchItems is the size of the checkpointed long job.
	batchItems int
}

// noteSwitch records a change of primary.
func (h *chaosHarness) noteSwitch(at time.Time) {
	h.switchMu.Lock()
	defer h.switchMu.Unlock()
	h.switches = append(h.switches, at)
}

// switchesPrimary says whether the run changes the server asynq's queue
// is on under the workers (a Sentinel or a cluster failover).
func (h *chaosHarness) switchesPrimary() bool { return h.sentinel != nil || h.cluster != nil }

// nearSwitch says whether a task first went into Redis (enqueued, at)
// just before a change of primary: asynq marks a task active, then done,
// in writes no replica acknowledges, so a task a worker took from the old
// primary in the last moments may be pending again on the new one, and
// run again with its retry count at 0. That is asynq delivering the one
// enqueue again, not a second enqueue: with ReplicaAcks the enqueue itself
// reached the replica before the leader counted it, so a second enqueue of
// the slot would have found its ID. The enqueue, not the slot, is what
// the switch can catch: a leader catching up after an outage enqueues
// slots long past.
func (h *chaosHarness) nearSwitch(enqueued time.Time) bool {
	h.switchMu.Lock()
	defer h.switchMu.Unlock()
	for _, at := range h.switches {
		if !enqueued.Before(at.Add(-5*time.Second)) && !enqueued.After(at.Add(time.Second)) {
			return true
		}
	}
	return false
}

// chaosPaused is the schedule an operator pauses and resumes mid-run.
const chaosPaused = "every-2s"

func TestChaos(t *testing.T) {
	if !*chaosFlag {
		t.Skip("chaos harness is opt-in: run `make chaos` (go test ./runtime -run '^TestChaos$' -chaos -v)")
	}
	runChaosHarness(t, "redis")
}

// runChaosHarness is the chaos run on engine: "redis" (one Redis, or a
// Sentinel topology with the failover fault) or "cluster" (a Redis
// Cluster, TestChaosCluster). Only the topology and the faults differ;
// the schedules, the count and the verdict are the same.
func runChaosHarness(t *testing.T, engine string) {
	kinds := chaosFaults
	if engine == "cluster" {
		kinds = chaosClusterFaults
	}
	cfg := chaosConfigFromEnv(t, kinds)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := cfg.EvidenceDir(t, "belfry-chaos-")
	h := &chaosHarness{t: t, cfg: cfg, dir: dir, exe: exe}
	faults := cfg.Selected(kinds)
	t.Logf("chaos: engine=%s seed=%d replicas=%d duration=%s lease_ttl=%s grace=%s skew=±%s faults=%s dir=%s",
		engine, cfg.Seed, cfg.Replicas, cfg.Duration, cfg.TTL, cfg.Grace, cfg.Skew, strings.Join(faults, ","), dir)

	if engine == "cluster" {
		h.startCluster()
	} else if cfg.Faults["failover"] {
		// A primary, a replica and three sentinels; the harness and every
		// replica follow the primary, and the replicas' writes wait for
		// the replica's acknowledgement (Options.ReplicaAcks). The servers
		// refuse writes while their replica is gone (min-replicas-to-write,
		// as docs/redis.md recommends), so neither the leader nor a worker
		// acts on an old primary after the switch: the leader that would
		// remember an unacknowledged enqueue may be killed meanwhile.
		h.sentinel = redistest.NewSentinel(t, filepath.Join(dir, "sentinel"), redistest.SentinelOptions{MinReplicasToWrite: 1})
		t.Cleanup(h.sentinel.Close)
		h.redis, h.failover = h.sentinel.Servers[0], (*chaosHarness).sentinelFailover
		h.rdb = redis.NewFailoverClient(h.sentinel.FailoverOptions())
	} else {
		h.redis = redistest.NewPrivate(t, dir)
		t.Cleanup(h.redis.Stop)
		h.rdb = redis.NewClient(&redis.Options{Network: "unix", Addr: h.redis.Socket,
			DialTimeout: 200 * time.Millisecond, ReadTimeout: time.Second, WriteTimeout: time.Second})
	}
	t.Cleanup(func() { h.rdb.Close() })
	t.Cleanup(h.killAll) // only on a failure path; a normal run stops them first

	// The long job starts after the FLUSHALL (at 70-80% of the run): a
	// data loss takes its task and its checkpoint with it, which no
	// handler survives on Redis.
	batchAt := cfg.Duration * 85 / 100
	h.batchItems = cfg.BatchItems(batchAt)
	for i := range cfg.Replicas {
		h.replicas = append(h.replicas, &chaosReplica{idx: i, offset: cfg.Offset(i)})
		h.start(h.replicas[i])
	}
	noop := func(context.Context, registry.Occurrence) error { return nil }
	reg := chaosSchedules(noop, noop)
	for _, s := range reg.Schedules() {
		if !s.Family() {
			h.schedules = append(h.schedules, s.Name)
		}
	}

	// Warm-up: a leader has written every schedule's first cursor. Slots
	// before that were never meant to run (a new schedule starts from now),
	// and a leader ahead by the skew set that "now" up to skew in the
	// future, so counting starts after it.
	if !h.waitUntil(30*time.Second, "a leader to initialise every schedule's cursor", func() bool {
		n, err := h.rdb.HLen(context.Background(), store.KeyPrefix(chaosNamespace)+"cursors").Result()
		return err == nil && int(n) == chaosOrdinary(reg)
	}) {
		t.FailNow()
	}
	warm := time.NewTimer(cfg.Skew + 2*time.Second)
	<-warm.C
	start := time.Now()
	windowStart := start.Truncate(time.Second).Add(time.Second)

	h.operator, err = runtime.New(reg, runtime.Options{Redis: h.rdb, Namespace: chaosNamespace, Replica: "operator",
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	stopWatch := h.watch()
	operator := h.operatorPauses(start)
	fam := h.familyChurn(reg, start)
	batchTriggered := chaoskit.TriggerBatch(t, start.Add(batchAt), h.batchItems, func(ctx context.Context) (string, error) {
		occ, err := h.operator.Trigger(runtime.WithActor(ctx, "chaos"), chaoskit.BatchSchedule, "chaos-batch")
		return occ.ID, err
	})
	h.runChaos(start)
	<-operator
	end := time.Now()
	<-batchTriggered
	h.logf("faults over after %s; the long job's worker is stopped and killed, then draining", end.Sub(start).Round(time.Millisecond))
	batch := chaoskit.StopAndKillBatchWorker(t, h.dir, h.procs(), func(i int) { h.start(h.replicas[i]) })

	slots := windowSlots(reg, windowStart, end)
	famDue := fam.slots(windowStart, end)
	for name, list := range famDue {
		slots[name] = list
	}
	h.drain(slots, end)
	h.waitUntil(3*time.Minute, "the long job to be done", func() bool {
		rec, err := chaoskit.ReadBatchLogs(h.dir)
		return err == nil && rec.Done && len(rec.Processed) == h.batchItems
	})
	lost := h.lostWindows()
	h.logf("losses detected: %+v", lost)
	stopWatch()
	h.stopAll()

	runs, retries := h.readRecords()
	enqueues := h.readEnqueueLogs()
	if len(enqueues.byTask) == 0 {
		// Without them a slot reached late is judged by its own time,
		// and a miss cannot be explained.
		t.Error("chaos: no replica recorded an enqueue: the enqueue hook saw none of the enqueue scripts")
	}
	var occurrences, duplicates, missed, redelivered, pausedSlots, lostWindow, failoverReruns, queuedAtFlush, windowReruns int
	// twice counts a slot's extra first attempts: duplicates, unless the
	// slot ran again around a change of primary (see nearSwitch).
	twice := func(name, at string, slot int64, first int) {
		switch {
		case first <= 1:
		case h.switchesPrimary() && h.nearSwitch(enqueues.firstEnqueue(name, slot)):
			failoverReruns += first - 1
			t.Logf("chaos: %s slot %s (%d) ran %d times as a first attempt, around a change of primary", name, at, slot, first)
		default:
			duplicates += first - 1
			t.Errorf("chaos: %s slot %s (%d) ran %d times as a first attempt", name, at, slot, first)
		}
	}
	for _, s := range reg.Schedules() {
		for _, slot := range slots[s.Name] {
			first, again := runs[s.Name][slot], retries[s.Name][slot]
			at := time.Unix(slot, 0).UTC().Format(time.TimeOnly)
			if s.Name == chaosPaused {
				switch h.pausedState(time.Unix(slot, 0), enqueues.reached(h.schedules, slot)) {
				case slotPaused:
					pausedSlots++
					if first+again > 0 {
						t.Errorf("chaos: %s slot %s (%d) ran %d times although it came due while paused", s.Name, at, slot, first+again)
					}
					continue
				case slotMaybePaused: // within skew of the pause or resume: either is right
					twice(s.Name, at, slot, first)
					continue
				}
			}
			if inLostWindow(lost, time.Unix(slot, 0)) {
				// Redis lost its data here: such a slot may not have run,
				// or may have run again (the task IDs that stopped a
				// second enqueue went with the data; a replica started
				// after the loss, or behind by the skew, cannot know what
				// ran). The runtime says as much when it records the
				// loss; the count is printed, not failed.
				lostWindow++
				if first > 1 {
					windowReruns += first - 1
					t.Logf("chaos: %s slot %s (%d) ran %d times as a first attempt, inside a detected data-loss window", s.Name, at, slot, first)
				}
				continue
			}
			if first+again == 0 {
				flushed, why := h.unran(enqueues, s.Name, slot)
				if flushed {
					// Its task was in asynq's queue when Redis lost it: a
					// slot of the data-loss event.
					lostWindow++
					queuedAtFlush++
					t.Logf("chaos: %s slot %s (%d) never ran: %s", s.Name, at, slot, why)
					continue
				}
				occurrences++
				missed++
				if missed <= 20 {
					t.Errorf("chaos: %s slot %s (%d) never ran: %s", s.Name, at, slot, why)
				}
				continue
			}
			occurrences++
			switch {
			case first > 1:
				twice(s.Name, at, slot, first)
			}
			if again > 0 {
				redelivered += again
				t.Logf("chaos: %s slot %s (%d) ran %d time(s) as an asynq retry after %d first attempt(s)",
					s.Name, at, slot, again, first)
			}
		}
	}
	famCounts := fam.check(t, famDue, runs, retries, lost, enqueues)
	occurrences, duplicates, missed = occurrences+famCounts.occurrences, duplicates+famCounts.duplicates, missed+famCounts.missed
	lostWindow, queuedAtFlush = lostWindow+famCounts.queuedAtFlush, queuedAtFlush+famCounts.queuedAtFlush
	failoverReruns, windowReruns = failoverReruns+famCounts.failoverReruns, windowReruns+famCounts.windowReruns
	if missed > 20 {
		t.Errorf("chaos: ... and %d more slots never ran", missed-20)
	}
	if redelivered > 0 {
		fmt.Printf("chaos: retries=%d (asynq redelivered a task it never saw acknowledged: at-least-once delivery, not a duplicate enqueue)\n", redelivered)
	}
	if failoverReruns > 0 {
		fmt.Printf("chaos: failover_reruns=%d (a task taken from the old primary just before a failover ran again from the new one: asynq's own writes wait for no replica)\n", failoverReruns)
	}
	if windowReruns > 0 {
		fmt.Printf("chaos: window_reruns=%d (slots inside a detected data-loss window that ran again: the task IDs that stop a second enqueue were lost with the data)\n", windowReruns)
	}
	if h.freezes > 0 {
		fmt.Printf("chaos: freezes=%d (leader stopped for just under its lease)\n", h.freezes)
	}
	if h.latencies > 0 {
		fmt.Printf("chaos: latency_spikes=%d handovers=%d (the leader's replies slowed for several seconds; leaders that handed the lease over for lateness)\n",
			h.latencies, h.countInLogs("handed the lease over"))
	}
	skew := strconv.FormatFloat(cfg.Skew.Seconds(), 'f', -1, 64)
	line := fmt.Sprintf("chaos: occurrences=%d duplicates=%d missed=%d kills=%d pauses=%d skew_s=%s redis_restarts=%d paused_slots=%d flushes=%d lost_window=%d partitions=%d stalls=%d failovers=%d",
		occurrences, duplicates, missed, h.kills, h.pauses, skew, h.redisRestarts, pausedSlots, h.flushes, lostWindow,
		h.partitions, h.stalls, h.failovers)
	line += fmt.Sprintf(" family_occurrences=%d family_after_delete=%d queued_at_flush=%d", famCounts.occurrences, famCounts.afterDelete, queuedAtFlush)
	if h.cluster != nil {
		line += h.clusterSummary(failoverReruns)
	}
	batch = h.countBatch(batch)
	line += batch.Summary()
	chaoskit.WriteSummary(t, *chaosSummary, line)
	if occurrences == 0 {
		t.Error("chaos: no slot came due in the window")
	}
	if pausedSlots == 0 {
		t.Error("chaos: no slot came due while the operator's pause held")
	}
	if h.flushes > 0 && len(lost) == 0 {
		t.Error("chaos: Redis lost its data and no replica detected it")
	}
	fmt.Println(line)
}

// countBatch counts the long job's processings from the replicas' logs.
// On Redis a batch's effect and its checkpoint are two writes: each
// interruption may process one batch again, never more.
func (h *chaosHarness) countBatch(hits chaoskit.BatchCounts) chaoskit.BatchCounts {
	rec, err := chaoskit.ReadBatchLogs(h.dir)
	if err != nil {
		h.t.Errorf("chaos: reading the long job's logs: %v", err)
	}
	c := chaoskit.CountBatch(h.batchItems, func(i int) int { return rec.Processed[i] })
	c.Attempts, c.SIGTERMs, c.SIGKILLs = rec.Attempts, hits.SIGTERMs, hits.SIGKILLs
	if c.Missing > 0 {
		h.t.Errorf("chaos: the long job left %d of its %d items unprocessed", c.Missing, c.Items)
	}
	if bound := chaoskit.BatchSize * max(c.Attempts-1, 0); c.Dups > bound {
		h.t.Errorf("chaos: the long job processed %d items again over %d interruptions; want at most one batch (%d) each",
			c.Dups, c.Attempts-1, chaoskit.BatchSize)
	}
	if c.Attempts < 3 {
		h.t.Errorf("chaos: the long job ran in %d attempts; want at least its timeout, the SIGTERM and the SIGKILL to interrupt it", c.Attempts)
	}
	return c
}

// operatorPauses pauses chaosPaused at 15% of the run and resumes it at 40%,
// through the runtime's API as an operator on any replica would, retrying
// while Redis is being restarted. The returned channel closes when done.
func (h *chaosHarness) operatorPauses(start time.Time) <-chan struct{} {
	done := make(chan struct{})
	rt := h.operator
	act := func(at time.Duration, what string, do func(context.Context) error) (first, done time.Time) {
		time.Sleep(time.Until(start.Add(at)))
		first = time.Now()
		for {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			err := do(runtime.WithActor(ctx, "chaos"))
			cancel()
			if err == nil {
				h.logf("operator: %s %s", what, chaosPaused)
				return first, time.Now()
			}
			h.logf("operator: %s %s failed, retrying: %v", what, chaosPaused, err)
			time.Sleep(100 * time.Millisecond)
		}
	}
	go func() {
		defer close(done)
		h.operatorPause.fromFirst, h.operatorPause.from = act(h.cfg.Duration*15/100, "paused", func(ctx context.Context) error {
			return rt.Pause(ctx, chaosPaused, "chaos: an operator pauses mid-run")
		})
		h.operatorPause.toFirst, h.operatorPause.to = act(h.cfg.Duration*40/100, "resumed", func(ctx context.Context) error {
			return rt.Resume(ctx, chaosPaused)
		})
	}()
	return done
}

type pausedState int

const (
	slotRuns pausedState = iota
	slotPaused
	slotMaybePaused
)

// pausedState says whether a slot of chaosPaused had to be paused. A
// leader reads the pause when the slot comes due by its own clock, which
// may be off by the skew, and a slot already enqueued when the pause was
// set still runs: slots within skew plus a second of either edge may go
// either way. A leader that reaches a slot late (catching up after an
// outage) reads the pause then, and records a slot that came due before
// it as paused: reached is when a leader first enqueued any schedule's
// task of the slot (zero if none did), and a slot first reached while the
// pause may have held may go either way too.
func (h *chaosHarness) pausedState(slot, reached time.Time) pausedState {
	p := h.operatorPause
	margin := h.cfg.Skew + time.Second
	switch {
	case slot.After(p.from.Add(margin)) && slot.Before(p.toFirst.Add(-margin)):
		return slotPaused
	case slot.After(p.fromFirst.Add(-margin)) && slot.Before(p.to.Add(margin)):
		return slotMaybePaused
	case slot.Before(p.fromFirst) && reached.After(p.fromFirst) && reached.Before(p.to.Add(margin)):
		return slotMaybePaused
	}
	return slotRuns
}

// windowSlots lists, per schedule, every slot in [from, to] by true time.
func windowSlots(reg *registry.Registry, from, to time.Time) map[string][]int64 {
	out := map[string][]int64{}
	for _, s := range reg.Schedules() {
		if s.Family() {
			continue // per member: see chaosFamilyRun.slots
		}
		for slot := s.Next(from.Add(-time.Nanosecond)); !slot.IsZero() && !slot.After(to); slot = s.Next(slot) {
			out[s.Name] = append(out[s.Name], slot.Unix())
		}
	}
	return out
}

// chaosEvent is one step of the fault schedule, at an offset from the start.
type chaosEvent struct {
	at   time.Duration
	kind string // a fault of chaosFaults ("redis" is restart), or a follow-up
	hold time.Duration
	// delay is a latency spike's added reply latency.
	delay time.Duration
	// target is what a cluster fault hits: the master of the namespace's
	// slot or of the queue's (clusterNamespace, clusterQueue).
	target string
	// tries counts attempts to find a leader to hit.
	tries int
	do    func()
}

// plan draws the whole fault schedule from the seed before anything runs,
// so a seed names one sequence of faults. Which replica each fault hits is
// whichever leads at that moment.
func (h *chaosHarness) plan() []*chaosEvent {
	cfg := h.cfg
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x62656c667279))
	between := func(lo, hi time.Duration) time.Duration {
		return lo + time.Duration(rng.Int64N(int64(hi-lo)+1))
	}
	var evs []*chaosEvent
	for at := between(2*time.Second, 5*time.Second); at < cfg.Duration; at += between(2*time.Second, 6*time.Second) {
		ev := &chaosEvent{at: at, kind: "kill", hold: between(500*time.Millisecond, 3*time.Second)}
		if rng.IntN(4) == 0 {
			// Longer than the lease: the key expires, another replica takes
			// over, and this one wakes up still thinking it leads.
			ev.kind, ev.hold = "pause", between(cfg.TTL+time.Second, 2*cfg.TTL+2*time.Second)
		}
		evs = append(evs, ev)
	}
	if !slices.ContainsFunc(evs, func(e *chaosEvent) bool { return e.kind == "pause" }) && len(evs) > 1 {
		evs[1].kind, evs[1].hold = "pause", cfg.TTL+2*time.Second
	}
	if !slices.ContainsFunc(evs, func(e *chaosEvent) bool { return e.kind == "kill" }) {
		evs[0].kind = "kill"
	}
	if cfg.Faults["freeze"] {
		// Last, so no later kill hides it: a replica that stops scheduling
		// while it keeps its lease shows up as missed slots at the end.
		evs[len(evs)-1].kind = "freeze"
	}
	evs = slices.DeleteFunc(evs, func(e *chaosEvent) bool { return !cfg.Faults[e.kind] })
	if cfg.Faults["restart"] {
		evs = append(evs, &chaosEvent{at: between(cfg.Duration*55/100, cfg.Duration*62/100), kind: "redis",
			hold: between(200*time.Millisecond, 1500*time.Millisecond)})
	}
	if cfg.Faults["flush"] {
		// Data loss: FLUSHALL takes the lease, the token counter, the epoch,
		// the cursors and every task ID at once.
		evs = append(evs, &chaosEvent{at: between(cfg.Duration*70/100, cfg.Duration*80/100), kind: "flush"})
	}
	// The link and Redis faults, once per minute of the run, each in its
	// own part of the minute so that each is seen on its own at least once
	// (kills and pauses go on throughout). They are spaced so that the
	// outages they cause (a failover under ReplicaAcks stops writes until
	// the old primary has resynced as a replica, some 10 s) do not add up
	// to more than grace: slots older than that are missed by design.
	for minute := time.Duration(0); minute < max(cfg.Duration/time.Minute, 1); minute++ {
		span := min(cfg.Duration, time.Minute)
		at := func(lo, hi int) time.Duration {
			return minute*time.Minute + between(span*time.Duration(lo)/100, span*time.Duration(hi)/100)
		}
		if cfg.Faults["partition"] {
			// Several TTLs: the leader steps down, another takes over, and
			// what the old leader sent into the partition arrives after.
			evs = append(evs, &chaosEvent{at: at(5, 15), kind: "partition", hold: between(3*cfg.TTL, 6*cfg.TTL)})
		}
		if cfg.Faults["latency"] {
			// Slower than a renewal needs, slow enough that enqueues fall
			// behind: the leader must hand over, or its renewals fail.
			evs = append(evs, &chaosEvent{at: at(20, 30), kind: "latency", hold: between(15*time.Second, 25*time.Second),
				delay: between(cfg.TTL/8, cfg.TTL/4)})
		}
		if cfg.Faults["stall"] {
			evs = append(evs, &chaosEvent{at: at(88, 92), kind: "stall", hold: between(cfg.TTL/2, 2*cfg.TTL)})
		}
		if cfg.Faults["failover"] && h.failover != nil {
			evs = append(evs, &chaosEvent{at: at(42, 48), kind: "failover"})
		}
		if h.cluster != nil {
			evs = append(evs, h.planCluster(minute, at)...)
		}
	}
	slices.SortStableFunc(evs, func(a, b *chaosEvent) int { return cmp.Compare(a.at, b.at) })
	return evs
}

// runChaos plays the fault schedule, then finishes pending restarts and
// resumes so every replica is up for the drain.
func (h *chaosHarness) runChaos(start time.Time) {
	h.chaosStart = start
	queue := h.plan()
	var plan []string
	for _, ev := range queue {
		plan = append(plan, fmt.Sprintf("%s@%s/%s", ev.kind, ev.at.Round(time.Millisecond), ev.hold.Round(time.Millisecond)))
	}
	h.logf("fault plan (kind@offset/hold): %s", strings.Join(plan, " "))
	for _, ev := range queue {
		switch ev.kind {
		case "kill", "pause", "freeze", "partition", "latency":
			ev.do = func() { h.hitLeader(ev, &queue) }
		case "stall":
			ev.do = func() { h.stallRedis(ev) }
		case "failover":
			ev.do = func() { h.failover(h) }
		case "redis":
			ev.do = func() { h.restartRedis(ev, &queue) }
		case "flush":
			ev.do = h.flush
		case "cluster_failover", "reshard", "master_kill":
			ev.do = func() { h.clusterFault(ev) }
		}
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for len(queue) > 0 {
		slices.SortStableFunc(queue, func(a, b *chaosEvent) int { return cmp.Compare(a.at, b.at) })
		ev := queue[0]
		queue = queue[1:]
		if wait := time.Until(start.Add(ev.at)); wait > 0 {
			timer.Reset(wait)
			<-timer.C
		}
		// A late timer means the host stalled every process at once, which
		// is not a fault this harness injects; say so in the evidence.
		if late := time.Since(start.Add(ev.at)); late > time.Second {
			h.logf("%s event ran %s late: the host stalled", ev.kind, late.Round(time.Millisecond))
		}
		ev.do()
	}
	h.clusterFaults.wait()
}

// logf stamps harness events with the wall clock the replicas' logs use.
func (h *chaosHarness) logf(format string, args ...any) {
	h.t.Helper()
	h.t.Logf("chaos %s: "+format, append([]any{time.Now().UTC().Format("15:04:05.000")}, args...)...)
}

// after queues a follow-up (a restart, a resume) d from now.
func (h *chaosHarness) after(queue *[]*chaosEvent, d time.Duration, kind string, do func()) {
	*queue = append(*queue, &chaosEvent{at: time.Since(h.chaosStart) + d, kind: kind, do: do})
}

// hitLeader kills or pauses whichever replica holds the lease. With no
// running leader to hit (Redis down, the leader already paused, a takeover
// under way) it tries again shortly, a few times, then lets the event go.
func (h *chaosHarness) hitLeader(ev *chaosEvent, queue *[]*chaosEvent) {
	r := h.leader()
	if r == nil {
		if ev.tries++; ev.tries < 12 {
			ev.at = time.Since(h.chaosStart) + 250*time.Millisecond
			*queue = append(*queue, ev)
		} else {
			h.logf("%s skipped: no running leader", ev.kind)
		}
		return
	}
	switch ev.kind {
	case "kill":
		h.kills++
		h.logf("SIGKILL leader %s (pid %d); restart in %s", r.Name, r.Cmd.Process.Pid, ev.hold)
		r.Cmd.Process.Signal(syscall.SIGKILL)
		<-r.Exited
		r.State = chaoskit.Dead
		h.after(queue, ev.hold, "restart", func() { h.start(r) })
	case "freeze":
		h.freeze(r)
	case "partition":
		h.partitions++
		h.logf("partition: black-holing %s's link to Redis for %s", r.Name, ev.hold)
		r.cut()
		h.after(queue, ev.hold, "heal", func() {
			h.logf("partition of %s heals: what it sent meanwhile reaches Redis now", r.Name)
			r.heal()
		})
	case "latency":
		h.latencies++
		h.logf("latency: %s's replies from Redis %s late for %s", r.Name, ev.delay, ev.hold)
		r.delay(ev.delay)
		h.after(queue, ev.hold, "latency-end", func() {
			h.logf("latency on %s's link ends", r.Name)
			r.delay(0)
		})
	case "pause":
		h.pauses++
		h.logf("SIGSTOP leader %s (pid %d) for %s", r.Name, r.Cmd.Process.Pid, ev.hold)
		r.Cmd.Process.Signal(syscall.SIGSTOP)
		r.State = chaoskit.Paused
		h.after(queue, ev.hold, "resume", func() {
			h.logf("SIGCONT %s (pid %d): wakes up a zombie", r.Name, r.Cmd.Process.Pid)
			r.Cmd.Process.Signal(syscall.SIGCONT)
			r.State = chaoskit.Running
		})
	}
}

// freeze stops the leader just after a renewal for a little less than the
// lease TTL (a GC pause, CPU steal, a VM migration): it wakes after its own
// trust window (TTL - TTL/10 from the renewal) has ended but while its key
// still lives, so its next renewal succeeds with the same lease value. It
// must go on scheduling, or hand over; it must not hold the lease idle.
func (h *chaosHarness) freeze(r *chaosReplica) {
	key := store.KeyPrefix(chaosNamespace) + "lease"
	ttl := h.cfg.TTL
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	giveUp := time.Now().Add(2 * ttl)
	for time.Now().Before(giveUp) {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		v, err := h.rdb.Get(ctx, key).Result()
		pttl, err2 := h.rdb.PTTL(ctx, key).Result()
		cancel()
		if err != nil || err2 != nil || !strings.HasPrefix(v, r.Name+"|") {
			break
		}
		if pttl >= ttl-ttl/20 {
			hold := pttl - ttl/20
			h.freezes++
			h.logf("SIGSTOP leader %s (pid %d) for %s, just under its lease (key pttl %s)", r.Name, r.Cmd.Process.Pid,
				hold.Round(time.Millisecond), pttl)
			r.Cmd.Process.Signal(syscall.SIGSTOP)
			r.State = chaoskit.Paused
			wake := time.NewTimer(hold)
			<-wake.C
			r.Cmd.Process.Signal(syscall.SIGCONT)
			r.State = chaoskit.Running
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			left, _ := h.rdb.PTTL(ctx, key).Result()
			cancel()
			h.logf("SIGCONT %s (pid %d); its key had %s left", r.Name, r.Cmd.Process.Pid, left)
			return
		}
		<-tick.C
	}
	h.logf("freeze skipped: %s stopped leading before a renewal was seen", r.Name)
}

// leader is the running replica named in the lease key ("<replica>|<token>").
func (h *chaosHarness) leader() *chaosReplica {
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	v, err := h.rdb.Get(ctx, store.KeyPrefix(chaosNamespace)+"lease").Result()
	if err != nil {
		return nil
	}
	name, _, _ := strings.Cut(v, "|")
	for _, r := range h.replicas {
		if r.Name == name && r.State == chaoskit.Running {
			return r
		}
	}
	return nil
}

// restartRedis shuts Redis down cleanly (SIGTERM: the AOF is complete) and
// starts it again on the same socket and directory after a short outage.
func (h *chaosHarness) restartRedis(ev *chaosEvent, queue *[]*chaosEvent) {
	h.redisRestarts++
	h.logf("Redis shutdown (SIGTERM); down for %s", ev.hold)
	p := h.primary()
	p.Stop()
	h.after(queue, ev.hold, "redis-start", func() {
		p.Start()
		h.logf("Redis started again from its AOF")
	})
}

// stallRedis makes Redis stop answering everyone for ev.hold, as a long
// fork, a slow disk or a big KEYS does: DEBUG SLEEP, sent on a connection
// of its own that waits for it, so the schedule goes on meanwhile.
func (h *chaosHarness) stallRedis(ev *chaosEvent) {
	h.stalls++
	h.logf("stall: DEBUG SLEEP %s", ev.hold)
	go func() {
		rdb := redis.NewClient(&redis.Options{Network: "unix", Addr: h.primary().Socket, ReadTimeout: ev.hold + 10*time.Second, MaxRetries: -1})
		defer rdb.Close()
		if err := rdb.Do(context.Background(), "DEBUG", "SLEEP", ev.hold.Seconds()).Err(); err != nil {
			h.logf("DEBUG SLEEP failed: %v", err)
			return
		}
		h.logf("stall over: Redis answers again")
	}()
}

// primary is the Redis server that takes writes now.
func (h *chaosHarness) primary() *redistest.Private {
	if h.sentinel == nil {
		return h.redis
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if p, err := h.sentinel.Primary(ctx); err == nil {
		return p
	}
	return h.redis
}

// sentinelFailover has a sentinel promote the replica (SENTINEL FAILOVER,
// with no wait for it to catch up) and waits until it answers as primary.
// Writes the old primary took but its replica did not acknowledge are
// lost; with ReplicaAcks the leader counted none of them as done.
func (h *chaosHarness) sentinelFailover() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	old, err := h.sentinel.Failover(ctx)
	if err != nil {
		h.logf("SENTINEL FAILOVER failed: %v", err)
		return
	}
	h.failovers++
	h.noteSwitch(time.Now())
	p := h.primary()
	h.logf("SENTINEL FAILOVER: %s promoted, %s is to become its replica", p.Addr, old.Addr)
}

// flush loses every key, as FLUSHALL, a restart without persistence or a
// failover to an empty replica does.
func (h *chaosHarness) flush() {
	// What the flush takes: the losses recorded before it (their records
	// go too) and the tasks asynq holds.
	h.noteLost()
	f := chaosFlush{snapshotAt: time.Now()}
	var err error
	if f.queued, err = h.queuedTasks(); err != nil {
		h.logf("listing the tasks before FLUSHALL failed: %v", err)
	}
	// A primary without its replica refuses writes for a while after a
	// failover (min-replicas-to-write): try for a few seconds.
	for range 40 {
		f.sentAt = time.Now()
		if err = h.rdb.FlushAll(context.Background()).Err(); err == nil {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if err != nil {
		h.logf("FLUSHALL failed: %v", err)
		return
	}
	f.doneAt = time.Now()
	h.flushes++
	h.flushLog = append(h.flushLog, f)
	h.logf("FLUSHALL: every key is gone, with %d tasks of the queue", len(f.queued))
}

// lostWindows returns the windows of slots the replicas reported may not
// have run because Redis lost data: those in Redis now and those seen
// during the run whose record a later loss took.
func (h *chaosHarness) lostWindows() []runtime.LostWrites {
	if _, err := h.operator.Redis().LostWrites(context.Background()); err != nil {
		h.t.Errorf("reading the detected losses: %v", err)
	}
	h.noteLost()
	h.lostMu.Lock()
	defer h.lostMu.Unlock()
	return slices.Clone(h.lostSeen)
}

// inLostWindow says whether a slot lies in a window a replica recorded.
func inLostWindow(windows []runtime.LostWrites, slot time.Time) bool {
	for _, w := range windows {
		if !slot.Before(w.From) && !slot.After(w.To) {
			return true
		}
	}
	return false
}

// start launches a new incarnation of replica r.
func (h *chaosHarness) start(r *chaosReplica) {
	h.t.Helper()
	r.incarnation++
	r.Name = fmt.Sprintf("r%d.%d", r.idx, r.incarnation)
	// link is how the replica reaches Redis: through its slot's own
	// proxies, kept across incarnations.
	var link []string
	if h.cluster != nil {
		if r.link == nil {
			r.link = h.cluster.NewLink(h.t)
		}
		link = []string{envCluster + "=" + r.link.Routes(), envQueue + "=" + chaosQueue}
	} else {
		if r.proxy == nil {
			r.proxy = redistest.NewProxyTo(h.t, func() (string, string, error) {
				if h.sentinel == nil {
					return "unix", h.redis.Socket, nil
				}
				// The primary now: after a failover the old one drops its
				// clients, and they reconnect to the new one.
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				p, err := h.sentinel.Primary(ctx)
				if err != nil {
					return "", "", err
				}
				return "unix", p.Socket, nil
			})
		}
		link = []string{envSocket + "=" + h.primary().Socket, envAddr + "=" + r.proxy.Addr()}
	}
	logf, err := os.Create(filepath.Join(h.dir, "replica-"+r.Name+".log"))
	if err != nil {
		h.t.Fatal(err)
	}
	defer logf.Close() // the child keeps its own descriptor
	cmd := exec.Command(h.exe, "-test.run=^TestChaosReplica$", "-test.count=1", "-test.timeout=0", "-test.v")
	cmd.Env = append(append(os.Environ(), link...),
		envReplica+"="+r.Name,
		envAcks+"="+strconv.FormatBool(h.sentinel != nil),
		envOffset+"="+r.offset.String(),
		envRecord+"="+filepath.Join(h.dir, "exec-"+r.Name+".log"),
		envEnqueues+"="+filepath.Join(h.dir, "enq-"+r.Name+".log"),
		envTTL+"="+h.cfg.TTL.String(),
		envGrace+"="+h.cfg.Grace.String(),
		envBatchItems+"="+strconv.Itoa(h.batchItems),
		// The bound on skew the replicas are told: the harness's own skew
		// and a second. It sizes the task IDs' retention and, after a
		// data loss, how far past Redis's clock the cursors move.
		envSkew+"="+(h.cfg.Skew+time.Second).String(),
	)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := r.Start(cmd); err != nil {
		h.t.Fatalf("starting replica %s: %v", r.Name, err)
	}
	h.logf("started replica %s (pid %d, clock offset %s)", r.Name, cmd.Process.Pid, r.offset)
}

// drain keeps the replicas running until every slot of the window has run
// and no task of the window is still queued, active or waiting to retry
// (a task orphaned by a SIGKILLed worker is recovered by asynq after its
// lease, and its retry may run the handler again: that must be seen).
func (h *chaosHarness) drain(slots map[string][]int64, end time.Time) {
	// A replica behind by the skew enqueues the last slots that much later,
	// and a leader killed at the very end is replaced within a TTL.
	settle := time.NewTimer(h.cfg.Skew + h.cfg.TTL + 2*time.Second)
	<-settle.C
	insp := asynq.NewInspectorFromRedisClient(h.rdb)
	defer insp.Close()
	endUnix := end.Unix()
	lost := h.lostWindows() // slots in them may never run
	deadline := 3*time.Minute + h.cfg.Grace
	var last string
	h.waitUntil(deadline, "the window's tasks to finish", func() bool {
		runs, retries := h.readRecords()
		var logs *enqueueLogs
		for name, list := range slots {
			for _, slot := range list {
				if inLostWindow(lost, time.Unix(slot, 0)) {
					continue
				}
				if runs[name][slot]+retries[name][slot] == 0 {
					if logs == nil {
						l := h.readEnqueueLogs()
						logs = &l
					}
					if name == chaosPaused && h.pausedState(time.Unix(slot, 0), logs.reached(h.schedules, slot)) != slotRuns {
						continue // paused slots never run
					}
					if flushed, _ := h.unran(*logs, name, slot); flushed {
						continue // a FLUSHALL took its task
					}
					last = fmt.Sprintf("%s slot %d has not run", name, slot)
					return false
				}
			}
		}
		for _, list := range []func(string, ...asynq.ListOption) ([]*asynq.TaskInfo, error){
			insp.ListPendingTasks, insp.ListActiveTasks, insp.ListRetryTasks, insp.ListScheduledTasks,
		} {
			tasks, err := list(chaosQueue, asynq.PageSize(10000))
			if err != nil && !errors.Is(err, asynq.ErrQueueNotFound) {
				last = err.Error()
				return false
			}
			for _, ti := range tasks {
				i := strings.LastIndexByte(ti.ID, ':')
				if slot, err := strconv.ParseInt(ti.ID[i+1:], 10, 64); err == nil && slot <= endUnix {
					last = fmt.Sprintf("task %s is %s", ti.ID, ti.State)
					return false
				}
			}
		}
		return true
	}, func() string { return last })
}

// watch logs, while the run lasts, every stretch of more than 3s in which
// nothing ran: with a per-second schedule that is a stalled scheduler, and
// the lease holder at that moment is the first suspect. It is evidence to
// read, not a measure of the leader's progress: a zombie's worker, or
// asynq re-delivering an orphaned task, runs a task in the middle of an
// outage (see enqueueLogs.quietStretches).
func (h *chaosHarness) watch() (stop func()) {
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		var size int64
		lastRun := time.Now()
		quiet := false
		primary := h.primary()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			h.noteLost()
			if h.sentinel != nil {
				if p := h.primary(); p != primary {
					h.logf("watch: %s is primary now", p.Addr)
					h.noteSwitch(time.Now())
					primary = p
				}
			}
			var n int64
			files, _ := filepath.Glob(filepath.Join(h.dir, "exec-*.log"))
			for _, f := range files {
				if fi, err := os.Stat(f); err == nil {
					n += fi.Size()
				}
			}
			if n != size {
				if quiet {
					h.logf("watch: executions resumed after %s", time.Since(lastRun).Round(time.Second))
				}
				size, lastRun, quiet = n, time.Now(), false
				continue
			}
			if idle := time.Since(lastRun); idle > 3*time.Second && !quiet || quiet && idle%(30*time.Second) < time.Second {
				quiet = true
				ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
				v, err := h.rdb.Get(ctx, store.KeyPrefix(chaosNamespace)+"lease").Result()
				pttl, _ := h.rdb.PTTL(ctx, store.KeyPrefix(chaosNamespace)+"lease").Result()
				cancel()
				h.logf("watch: nothing ran for %s; lease=%q pttl=%s err=%v", idle.Round(time.Second), v, pttl, err)
			}
		}
	}()
	return func() { close(done); <-finished }
}

// countInLogs counts the replicas' log lines that contain text.
func (h *chaosHarness) countInLogs(text string) int {
	n := 0
	files, _ := filepath.Glob(filepath.Join(h.dir, "replica-*.log"))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err == nil {
			n += strings.Count(string(b), text)
		}
	}
	return n
}

// readRecords counts executions per schedule and slot: first attempts and
// asynq retries apart, since two first attempts of one slot mean it was
// enqueued twice while a retry is asynq redelivering the one task.
func (h *chaosHarness) readRecords() (runs, retries map[string]map[int64]int) {
	runs, retries = map[string]map[int64]int{}, map[string]map[int64]int{}
	files, _ := filepath.Glob(filepath.Join(h.dir, "exec-*.log"))
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			h.t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) != 6 {
				continue // a line cut short by a SIGKILL mid-write
			}
			slot, err1 := strconv.ParseInt(fields[1], 10, 64)
			retry, err2 := strconv.Atoi(fields[2])
			if err1 != nil || err2 != nil {
				continue
			}
			m := runs
			if retry > 0 {
				m = retries
			}
			if m[fields[0]] == nil {
				m[fields[0]] = map[int64]int{}
			}
			m[fields[0]][slot]++
		}
		f.Close()
	}
	return runs, retries
}

// stopAll stops every replica the way a deploy does (chaoskit.StopAll).
func (h *chaosHarness) stopAll() { chaoskit.StopAll(h.t, h.procs()) }

// killAll is the failure-path cleanup (chaoskit.KillAll).
func (h *chaosHarness) killAll() { chaoskit.KillAll(h.procs()) }

// procs are the replicas' current processes.
func (h *chaosHarness) procs() []*chaoskit.Proc {
	out := make([]*chaoskit.Proc, len(h.replicas))
	for i, r := range h.replicas {
		out[i] = &r.Proc
	}
	return out
}

// waitUntil is chaoskit.WaitUntil on the harness's test.
func (h *chaosHarness) waitUntil(within time.Duration, what string, cond func() bool, why ...func() string) bool {
	h.t.Helper()
	return chaoskit.WaitUntil(h.t, within, what, cond, why...)
}
