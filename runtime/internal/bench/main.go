// Command bench measures belfry against what a Go user would pick instead,
// asynq's own Scheduler, in one run on one private redis-server, and prints
// a table and, last, one summary line:
//
//	bench: next_vs_robfig=R fire_p99_ms=F asynq_fire_p99_ms=A takeover_crash_ttl=T takeover_graceful_s=G spike10k_s=S spike_vs_raw=V leader_cmds_min=L follower_cmds_min=W dup_asynq=DA dup_belfry=DB cronlint10k_s=C redis_kb_per_1s=M rss_kb_per_sched=P dst_fire_p99_ms=D admin100k_ms=AD family_takeover_s=… family_dup=… cluster_fire_p99_ms=CF asynq_cluster_fire_p99_ms=CA cluster_spike10k_s=CS
//
// cronlint10k_s is go vet -vettool=cronlint on a 10,000-schedule package;
// redis_kb_per_1s Redis's memory per per-second schedule at steady state;
// rss_kb_per_sched a replica's RSS per zoned schedule at 100,000;
// dst_fire_p99_ms the fire lag of 3,000 per-second New York schedules
// across a fall-back; admin100k_ms the slowest admin endpoint's worst time
// at 100,000 schedules. The quick run measures smaller sizes, and says so
// in its table. The family_ keys are a 100,000-member family's (see
// family.go). The cluster_ keys are fire_p99_ms, asynq_fire_p99_ms and
// spike10k_s measured again on a Redis Cluster of the step's own, the
// namespace's slot and the queue's on different masters (see cluster.go).
//
// BENCH_QUICK=1 shortens every measurement for a smoke run; BENCH_ONLY=fire,spike
// runs a subset (steps: next, fire, takeover, spike, idle, duplicates,
// memory, dst, scale, lint, admin, family, postgres, cluster). The postgres step
// needs the machine's PostgreSQL (BENCH_POSTGRES) and adds the pg_ keys;
// BENCH_PG_PARTS=side,spike,family runs some of its parts
// (see postgres.go). See BENCHMARKS.md.
package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
	"github.com/belfry/belfry/runtime/internal/store"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

func main() {
	if mode := os.Getenv(replicaEnv); mode == "scale" {
		scaleMain()
		return
	} else if mode == "pg-belfry" || mode == "pg-river" {
		pgReplicaMain(mode)
		return
	} else if mode != "" {
		replicaMain(mode)
		return
	}
	if os.Getenv("BENCH_FAMILY") == "1" { // the family measurements alone
		if err := familyMain(); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(os.Getenv("BENCH_QUICK") == "1"); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// settings scale the measurements; quick mode is a smoke run for CI, each
// step at small sizes and short windows (the family's spike members due
// every few seconds, not every half minute), long enough that each figure
// still counts something (an idle follower's few commands a minute).
type settings struct {
	benchtime     string
	fireSlots     int
	crashKills    int
	gracefulStops int
	idleSettle    time.Duration // how long the idle step lets a replica's start-up traffic pass
	idleWindow    time.Duration
	dupWindow     time.Duration
	spikeTrials   int
	// memory: per-second schedules succeeding, and failing, and how long
	// they run before and while Redis's memory is sampled
	memSchedules, memFailing            int
	memWarmup, memFailWarmup, memWindow time.Duration
	// dst: per-second New York schedules, run from dstLead before a
	// fall-back to dstAfter after it
	dstSchedules      int
	dstLead, dstAfter time.Duration
	// scale: replica processes of these sizes, then a spike of spikeLarge
	scaleSizes []int
	spikeLarge int
	lintSizes  []int // schedules in cronlint's generated packages
	// family: members, zones and members due at once of the family step.
	familyMembers, familyZones, familySpike int
	familyPeriod                            time.Duration // how often the spike members are due
	// postgres: per-second slots timed (p99 by nearest rank: of 120, the
	// second slowest, not the one slowest a lone hiccup makes), leader kills (each a round of
	// pgRound, which must outlast River's fixed leadership TTL), and the
	// schedules and family members due at one second.
	pgFireSlots, pgKills, pgSpike, pgFamilySpike int
	// pgFamilyTrials is how many of the family's slots are timed, one
	// after another; the figure is their median.
	pgFamilyTrials int
	pgRound        time.Duration
	// cluster: per-second slots timed, and the schedules due at one
	// second and the trials of it, and whether those run during the fire
	// measurement (the quick run's, to keep it short) or after it
	clusterFireSlots, clusterSpike, clusterSpikeTrials int
	clusterOverlap                                     bool
}

type results struct {
	nextRatio float64
	nextRows  [][]string
	fireFigures
	crashTTL                             float64
	crashDelays                          []time.Duration
	graceful                             time.Duration
	spike, raw                           time.Duration // medians of the trials
	spikes, raws                         []time.Duration
	spikeServiceCPU, spikeRedisCPU       time.Duration // medians of the trials
	leaderPerMin, followerPerMin         float64       // issued by the replica
	leaderExecPerMin, followerExecPerMin float64       // executed by Redis, script internals included
	dupAsynq, dupBelfry                  float64
	dupSlots                             int
	memOK, memFailing                    memoryRun
	dstSchedules, dstOccurrences         int
	dstP50, dstP99                       time.Duration
	// Of the slots across the transition: the median first enqueue, and
	// the median and p90 last, each after its slot.
	dstFirstP50, dstLastP50, dstLastP90 time.Duration
	// The process's heap allocations per enqueue and its collections per
	// second (a slot each) over the run's last dstLead/2+dstAfter, the
	// BENCH_REDIS_STATS window: the process hosts the runtime, and a
	// collection during a slot takes CPU from its enqueues (and from Redis
	// when the two share cores).
	dstAllocPerEnqueue, dstGCPerSlot float64
	scale                            []scaleRow
	redisPriority                    string // the private redis-server's, see redisNiceEnv
	takeoverSlow                     slowCall
	spikeLarge                       spikeLargeResult
	lint                             []lintRow
	admin                            adminResults
	family                           familyResult
	pg                               pgResult
	cluster                          clusterResult
}

// fireFigures are a side-by-side fire measurement's: belfry's lag and
// asynq's Scheduler's, p50, p99 and the three slowest.
type fireFigures struct {
	fireP50, fireP99, asynqP50, asynqP99 time.Duration
	fireTop, asynqTop                    []time.Duration
}

func fireFiguresOf(ours, theirs []time.Duration) fireFigures {
	return fireFigures{fireP50: percentile(ours, 50), fireP99: percentile(ours, 99), asynqP50: percentile(theirs, 50),
		asynqP99: percentile(theirs, 99), fireTop: slowest(ours, 3), asynqTop: slowest(theirs, 3)}
}

func run(quick bool) error {
	s := settings{benchtime: "1s", fireSlots: 120, crashKills: 5, gracefulStops: 3, idleSettle: 3 * time.Second, idleWindow: time.Minute, dupWindow: time.Minute, spikeTrials: 5,
		memSchedules: 100, memFailing: 10, memWarmup: 70 * time.Second, memFailWarmup: 150 * time.Second, memWindow: time.Minute,
		dstSchedules: 3000, dstLead: 30 * time.Second, dstAfter: time.Minute,
		scaleSizes: []int{1000, 10000, 100000}, spikeLarge: 100000, lintSizes: []int{1000, 10000, 100000},
		familyMembers: 100000, familyZones: 300, familySpike: 20000, familyPeriod: 30 * time.Second,
		pgFireSlots: 120, pgKills: 3, pgSpike: 10000, pgFamilySpike: 20000, pgFamilyTrials: 3, pgRound: 24 * time.Second,
		clusterFireSlots: 120, clusterSpike: 10000, clusterSpikeTrials: 5}
	if quick {
		s = settings{benchtime: "20ms", fireSlots: 6, crashKills: 1, gracefulStops: 1, idleSettle: time.Second, idleWindow: 4 * time.Second, dupWindow: 3 * time.Second, spikeTrials: 1,
			memSchedules: 10, memFailing: 2, memWarmup: 2 * time.Second, memFailWarmup: 2 * time.Second, memWindow: 2 * time.Second,
			dstSchedules: 200, dstLead: 4 * time.Second, dstAfter: 4 * time.Second,
			scaleSizes: []int{1000}, spikeLarge: 2000, lintSizes: []int{200},
			familyMembers: 3000, familyZones: 30, familySpike: 1000, familyPeriod: 5 * time.Second,
			pgFireSlots: 5, pgKills: 0, pgSpike: 1000, pgFamilySpike: 1000, pgFamilyTrials: 1, pgRound: 24 * time.Second,
			clusterFireSlots: 3, clusterSpike: 1000, clusterSpikeTrials: 1, clusterOverlap: true}
	}
	srv, err := startRedis()
	if err != nil {
		return err
	}
	defer srv.stop()
	r := results{redisPriority: srv.priority}
	type step struct {
		key, name string
		run       func() error
	}
	steps := []step{
		{"next", "Next vs robfig", func() error { return benchNext(s, &r) }},
		{"fire", "fire latency", func() error { return benchFireLatency(srv.addr, s, &r) }},
		{"takeover", "takeover", func() error { return benchTakeover(srv.addr, s, &r) }},
		{"spike", "midnight spike", func() error { return benchSpike(srv.addr, s, &r) }},
		{"idle", "idle cost", func() error { return benchIdle(srv.addr, s, &r) }},
		{"duplicates", "duplicates", func() error { return benchDuplicates(srv.addr, s, &r) }},
		{"memory", "Redis memory of per-second schedules", func() error { return benchMemory(srv.addr, s, &r) }},
		{"dst", "per-second schedules across a fall-back", func() error { return benchDST(srv.addr, s, &r) }},
		{"scale", "takeover, memory and spike at scale", func() error { return benchScale(srv.addr, s, &r) }},
		{"lint", "cronlint at scale", func() error { return benchLint(s, &r) }},
		{"admin", "admin at 1k-100k schedules", func() error { return benchAdmin(srv.addr, s, &r) }},
		{"family", "a family's members", func() (err error) {
			r.family, err = benchFamily(srv.addr, s.familyMembers, s.familyZones, s.familySpike, s.familyPeriod)
			return err
		}},
		{"postgres", "Postgres + River, belfry beside River's periodic jobs", func() error { return benchPostgres(s, &r) }},
		{"cluster", "Redis Cluster, namespace and queue on different masters", func() error { return benchCluster(s, &r) }},
	}
	var only []string // BENCH_ONLY=takeover,spike runs a subset
	if v := os.Getenv("BENCH_ONLY"); v != "" {
		only = strings.Split(v, ",")
		for _, key := range only {
			if !slices.ContainsFunc(steps, func(st step) bool { return st.key == key }) {
				return fmt.Errorf("BENCH_ONLY: unknown step %q; want some of next,fire,takeover,spike,idle,duplicates,memory,dst,scale,lint,admin,family,postgres,cluster", key)
			}
		}
	}
	for _, step := range steps {
		if only != nil && !slices.Contains(only, step.key) {
			continue
		}
		fmt.Fprintf(os.Stderr, "bench: %s...\n", step.name)
		began := time.Now()
		if err := step.run(); err != nil {
			return fmt.Errorf("%s: %w", step.name, err)
		}
		// Each step's wall time, so that a slow smoke run says which step
		// to shorten.
		fmt.Fprintf(os.Stderr, "bench: %s took %.1f s\n", step.key, time.Since(began).Seconds())
	}
	r.print(os.Stdout)
	return nil
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
}

func repoRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", err
	}
	return filepath.Dir(strings.TrimSpace(string(out))), nil
}

var benchLine = regexp.MustCompile(`^Benchmark(Next|RobfigNext)/(\S+?)(-\d+)?\s+\d+\s+([\d.]+) ns/op(?:\s+\d+ B/op\s+(\d+) allocs/op)?`)

// benchNext runs the registry's Next benchmarks (ours and robfig's on the
// same expressions, in one go test run) and reports the worst ratio.
func benchNext(s settings, r *results) error {
	root, err := repoRoot()
	if err != nil {
		return err
	}
	cmd := exec.Command("go", "test", "-run", "^$", "-bench", "^Benchmark(Next|RobfigNext)$", "-benchmem", "-benchtime", s.benchtime, "./registry")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go test -bench: %v\n%s", err, out)
	}
	type cost struct{ ns, allocs string }
	ours, theirs := map[string]cost{}, map[string]cost{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		m := benchLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		if m[1] == "Next" {
			ours[m[2]] = cost{m[4], m[5]}
		} else {
			theirs[m[2]] = cost{m[4], m[5]}
		}
	}
	names := make([]string, 0, len(ours))
	for name := range ours {
		if _, ok := theirs[name]; ok {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return fmt.Errorf("no paired Next/RobfigNext benchmarks in:\n%s", out)
	}
	slices.Sort(names)
	for _, name := range names {
		a, _ := strconv.ParseFloat(ours[name].ns, 64)
		b, _ := strconv.ParseFloat(theirs[name].ns, 64)
		ratio := a / b
		r.nextRatio = max(r.nextRatio, ratio)
		r.nextRows = append(r.nextRows, []string{name, ours[name].ns, ours[name].allocs, theirs[name].ns, theirs[name].allocs, fmt.Sprintf("%.2f", ratio)})
	}
	return nil
}

// benchFireLatency runs belfry and asynq's Scheduler side by side, each
// with a per-second schedule, and times each enqueue against its slot. The
// nearest-rank p99 of 60 samples is their maximum, one burst of CPU steal;
// the full run takes 120, where it is the second largest.
func benchFireLatency(addr string, s settings, r *results) error {
	ours, theirs, err := fireSideBySide(fireSetup{
		newClient: func() redis.UniversalClient { return redis.NewClient(&redis.Options{Addr: addr}) },
		namespace: "bench-fire", belfryQueue: "bench-fire-belfry", asynqQueue: "bench-fire-asynq", slots: s.fireSlots})
	if err != nil {
		return err
	}
	r.fireFigures = fireFiguresOf(ours, theirs)
	return nil
}

// fireSetup is where fireSideBySide runs: each side's client, made by
// newClient (a single Redis's, or a cluster's), and their names.
type fireSetup struct {
	newClient                          func() redis.UniversalClient
	namespace, belfryQueue, asynqQueue string
	slots                              int
}

// fireSideBySide runs belfry, with default options but the namespace, and
// asynq's Scheduler, each on a client of its own and with a per-second
// schedule of its own queue, and returns each side's lag of every enqueue
// after its slot, of f.slots slots after a warm-up.
func fireSideBySide(f fireSetup) (ours, theirs []time.Duration, err error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	belfryLog, asynqLog := newEventLog(), newEventLog()

	rdbB := f.newClient()
	defer rdbB.Close()
	addHook(rdbB, newEnqueueHook(f.belfryQueue, belfryLog.add))
	reg := registry.MustNew(registry.Schedule{Name: "tick", Expr: "* * * * * *", Queue: f.belfryQueue,
		Handler: func(context.Context, registry.Occurrence) error { return nil }})
	rt, err := runtime.New(reg, runtime.Options{Redis: rdbB, Namespace: f.namespace, Logger: quietLogger()})
	if err != nil {
		return nil, nil, err
	}
	done := make(chan struct{})
	go func() { rt.Run(ctx); close(done) }()
	defer func() { cancel(); <-done; rt.Close() }()

	rdbA := f.newClient()
	defer rdbA.Close()
	addHook(rdbA, newEnqueueHook(f.asynqQueue, asynqLog.add))
	sched := asynq.NewSchedulerFromRedisClient(rdbA, &asynq.SchedulerOpts{Location: time.UTC, LogLevel: asynq.FatalLevel})
	if _, err := sched.Register("@every 1s", asynq.NewTask("tick", nil), asynq.Queue(f.asynqQueue)); err != nil {
		return nil, nil, err
	}
	if err := sched.Start(); err != nil {
		return nil, nil, err
	}
	defer sched.Shutdown()

	const warmup = 2
	want := f.slots + warmup
	deadline := time.Now().Add(time.Duration(want+20) * time.Second)
	enough := func(evs []enqueueEvent) bool { return len(evs) >= want }
	if !belfryLog.waitUntil(deadline, enough) || !asynqLog.waitUntil(deadline, enough) {
		return nil, nil, fmt.Errorf("too few enqueues before the deadline: belfry %d, asynq %d of %d",
			len(belfryLog.snapshot()), len(asynqLog.snapshot()), want)
	}
	for _, e := range belfryLog.snapshot()[warmup:want] {
		ours = append(ours, e.at.Sub(slotOf(e.taskID)))
	}
	for _, e := range asynqLog.snapshot()[warmup:want] {
		theirs = append(theirs, e.at.Sub(e.at.Truncate(time.Second)))
	}
	return ours, theirs, nil
}

// slotOf reads the slot from a scheduled occurrence ID, "…:<unix>".
func slotOf(taskID string) time.Time {
	sec, _ := strconv.ParseInt(taskID[strings.LastIndexByte(taskID, ':')+1:], 10, 64)
	return time.Unix(sec, 0)
}

// slowest returns the n largest durations, largest first.
func slowest(ds []time.Duration, n int) []time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	slices.Reverse(s)
	return s[:min(n, len(s))]
}

// percentile is the nearest-rank percentile.
func percentile(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := max((p*len(s)+99)/100-1, 0)
	return s[i]
}

// benchTakeover kills or stops the leader of two replica processes and
// times the survivor's first enqueue. After SIGKILL that is the time from
// the kill. After SIGTERM the handover itself takes milliseconds, and the
// first enqueue then waits for its slot to come due, which is no part of
// the handover: that delay is counted from the kill or the slot,
// whichever is later.
func benchTakeover(addr string, s settings, r *results) error {
	const ttl = 2 * time.Second
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	logs := [2]*eventLog{newEventLog(), newEventLog()}
	var procs [2]*replicaProc
	start := func(i int) error {
		cfg := replicaConfig{mode: "belfry", redisAddr: addr, namespace: "bench-takeover", queue: "bench-takeover",
			name: "replica-" + strconv.Itoa(i), ttl: ttl}
		p, err := startReplica(cfg, logs[i])
		procs[i] = p
		return err
	}
	for i := range procs {
		if err := start(i); err != nil {
			return err
		}
	}
	defer func() {
		for _, p := range procs {
			p.stop()
		}
	}()
	leader := func() int {
		v, _ := rdb.Get(context.Background(), store.NewKeys("bench-takeover").Lease).Result()
		for i := range procs {
			if strings.HasPrefix(v, "replica-"+strconv.Itoa(i)+"|") {
				return i
			}
		}
		return -1
	}
	round := func(sig syscall.Signal) (time.Duration, error) {
		// Wait for a leader that is enqueueing, then let a random part of
		// its renewal period pass so kills land at every phase.
		var lead int
		deadline := time.Now().Add(4 * ttl)
		for lead = leader(); lead < 0 || len(logs[lead].snapshot()) == 0; lead = leader() {
			if time.Now().After(deadline) {
				return 0, errors.New("no enqueueing leader")
			}
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(time.Duration(rng.Int64N(int64(ttl / 3))))
		other := 1 - lead
		stopped := time.Now()
		procs[lead].signal(sig)
		procs[lead].wait()
		var first enqueueEvent
		ok := logs[other].waitUntil(stopped.Add(3*ttl), func(evs []enqueueEvent) bool {
			for _, e := range evs {
				if e.at.After(stopped) {
					first = e
					return true
				}
			}
			return false
		})
		if !ok {
			return 0, fmt.Errorf("no enqueue by the follower within %s", 3*ttl)
		}
		logs[lead] = newEventLog()
		if err := start(lead); err != nil {
			return 0, err
		}
		if sig == syscall.SIGKILL {
			return first.at.Sub(stopped), nil
		}
		return first.at.Sub(later(stopped, slotOf(first.taskID))), nil
	}
	for range s.crashKills {
		d, err := round(syscall.SIGKILL)
		if err != nil {
			return err
		}
		r.crashDelays = append(r.crashDelays, d)
	}
	var graceful []time.Duration
	for range s.gracefulStops {
		d, err := round(syscall.SIGTERM)
		if err != nil {
			return err
		}
		graceful = append(graceful, d)
	}
	r.crashTTL = float64(percentile(r.crashDelays, 50)) / float64(ttl)
	r.graceful = percentile(graceful, 50)
	return nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// benchSpike makes 10,000 schedules come due in the same second and times
// how long until all are in the queue, against a plain sequential loop of
// asynq Enqueue calls in the same run. A spike is over within its 0.5 s
// target, short enough for one burst of CPU steal on a shared machine to
// double it, so it is measured several times and the median reported,
// with every trial shown.
func benchSpike(addr string, s settings, r *results) error {
	var serviceCPUs, redisCPUs []time.Duration
	for trial := range s.spikeTrials {
		ns := fmt.Sprintf("bench-spike-%d", trial)
		t, err := spikeTrial(spikeSetup{
			newClient: func() redis.UniversalClient { return redis.NewClient(&redis.Options{Addr: addr, PoolSize: 32}) },
			redisCPU:  redisCPU, namespace: ns, queue: ns, schedules: 10000, raw: true})
		if err != nil {
			return fmt.Errorf("trial %d: %w", trial+1, err)
		}
		r.spikes = append(r.spikes, t.spike)
		r.raws = append(r.raws, t.raw)
		serviceCPUs = append(serviceCPUs, t.serviceCPU)
		redisCPUs = append(redisCPUs, t.redisCPU)
	}
	r.spike, r.raw = percentile(r.spikes, 50), percentile(r.raws, 50)
	r.spikeServiceCPU, r.spikeRedisCPU = percentile(serviceCPUs, 50), percentile(redisCPUs, 50)
	return nil
}

// spikeTrialResult is one trial: the spike's time and the CPU it took in
// the service (this process, hook included) and in Redis, and the plain
// loop's time.
type spikeTrialResult struct {
	spike, serviceCPU, redisCPU, raw time.Duration
}

// spikeSetup is where a spike trial runs: the client newClient makes (a
// single Redis's, or a cluster's), what Redis's CPU is read from (every
// node's, on a cluster), the namespace and the schedules' queue, and
// whether the plain loop is timed after it.
type spikeSetup struct {
	newClient        func() redis.UniversalClient
	redisCPU         func(context.Context, redis.UniversalClient) (time.Duration, error)
	namespace, queue string
	schedules        int
	raw              bool
}

// spikeTrial is one spike on a fresh namespace and queue, with default
// options but the namespace, checked for exactly once, then the plain
// loop if asked for.
func spikeTrial(sp spikeSetup) (res spikeTrialResult, err error) {
	n, ns := sp.schedules, sp.namespace
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	due := time.Now().Add(5 * time.Second).Truncate(time.Second).UTC()
	reg, err := spikeRegistry(ns, sp.queue, n, due)
	if err != nil {
		return res, err
	}
	var count atomic.Int64
	var last atomic.Int64
	rdb := sp.newClient()
	defer rdb.Close()
	addHook(rdb, newEnqueueHook(sp.queue, func(e enqueueEvent) {
		count.Add(1)
		last.Store(e.at.UnixNano())
	}))
	rt, err := runtime.New(reg, runtime.Options{Redis: rdb, Namespace: ns, Logger: quietLogger()})
	if err != nil {
		return res, err
	}
	done := make(chan struct{})
	go func() { rt.Run(ctx); close(done) }()
	defer func() { cancel(); <-done; rt.Close() }()
	// The CPU counters are read while the runtime idles just before the
	// slot and as soon as the last task is in.
	time.Sleep(time.Until(due.Add(-100 * time.Millisecond)))
	serviceBefore := processCPU()
	redisBefore, err := sp.redisCPU(ctx, rdb)
	if err != nil {
		return res, err
	}
	for count.Load() < int64(n) {
		if time.Now().After(due.Add(30 * time.Second)) {
			return res, fmt.Errorf("only %d of %d enqueued 30s after the slot", count.Load(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	res.serviceCPU = processCPU() - serviceBefore
	redisAfter, err := sp.redisCPU(ctx, rdb)
	if err != nil {
		return res, err
	}
	res.redisCPU = redisAfter - redisBefore
	res.spike = time.Unix(0, last.Load()).Sub(due)
	// Exactly once: the queue holds the expected task IDs, once each.
	ids, err := rdb.LRange(ctx, "asynq:{"+sp.queue+"}:pending", 0, -1).Result()
	if err != nil {
		return res, err
	}
	seen := map[string]bool{}
	for _, id := range ids {
		seen[id] = true
	}
	for i := range n {
		if id := (registry.Scope{Namespace: ns, Schedule: spikeName(i)}).ID(due); !seen[id] {
			return res, fmt.Errorf("task %s missing from the queue", id)
		}
	}
	if len(ids) != n || len(seen) != n {
		return res, fmt.Errorf("queue holds %d tasks (%d distinct), want %d", len(ids), len(seen), n)
	}
	if !sp.raw {
		return res, nil
	}
	client := asynq.NewClientFromRedisClient(rdb)
	start := time.Now()
	for i := range n {
		if _, err := client.Enqueue(asynq.NewTask("raw", nil), asynq.TaskID("raw-"+strconv.Itoa(i)), asynq.Queue(ns+"-raw")); err != nil {
			return res, err
		}
	}
	res.raw = time.Since(start)
	return res, nil
}

// spikeRegistry is n schedules of queue whose one slot a day is due.
func spikeRegistry(ns, queue string, n int, due time.Time) (*registry.Registry, error) {
	expr := fmt.Sprintf("%d %d %d * * *", due.Second(), due.Minute(), due.Hour())
	scheds := make([]registry.Schedule, n)
	for i := range scheds {
		scheds[i] = registry.Schedule{Name: spikeName(i), Expr: expr, Queue: queue,
			Handler: func(context.Context, registry.Occurrence) error { return nil }}
	}
	return registry.New(scheds...)
}

func spikeName(i int) string { return fmt.Sprintf("spike-%06d", i) }

// benchIdle measures the Redis traffic of a leader, then of a follower,
// with 100 schedules due once a day and default lease settings, two ways:
// commands each replica issues (a go-redis hook on its own client) and
// commands Redis executes (INFO commandstats, which also counts the calls a
// Lua script makes and the pub/sub health-check PINGs).
func benchIdle(addr string, s settings, r *results) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	scheds := make([]registry.Schedule, 100)
	for i := range scheds {
		scheds[i] = registry.Schedule{Name: fmt.Sprintf("daily-%03d", i), Expr: fmt.Sprintf("%d 3 * * *", i%60),
			Handler: func(context.Context, registry.Occurrence) error { return nil }}
	}
	reg := registry.MustNew(scheds...)
	admin := redis.NewClient(&redis.Options{Addr: addr})
	defer admin.Close()
	var running []chan struct{}
	startRuntime := func(name string, issued *atomic.Int64) error {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		rdb.AddHook(commandCounter{issued})
		rt, err := runtime.New(reg, runtime.Options{Redis: rdb, Namespace: "bench-idle", Replica: name, Logger: quietLogger()})
		if err != nil {
			return err
		}
		done := make(chan struct{})
		go func() { rt.Run(ctx); rt.Close(); rdb.Close(); close(done) }()
		running = append(running, done)
		return nil
	}
	defer func() {
		cancel()
		for _, done := range running {
			<-done
		}
	}()
	// measure returns the issued commands of one replica and the executed
	// commands of the whole server, per minute.
	measure := func(issued *atomic.Int64) (float64, float64, error) {
		time.Sleep(s.idleSettle) // let start-up traffic pass
		before, err := totalCalls(ctx, admin)
		if err != nil {
			return 0, 0, err
		}
		issuedBefore := issued.Load()
		time.Sleep(s.idleWindow)
		after, err := totalCalls(ctx, admin)
		if err != nil {
			return 0, 0, err
		}
		mins := s.idleWindow.Minutes()
		return float64(issued.Load()-issuedBefore) / mins, float64(after-before-1) / mins, nil // -1: the INFO itself
	}
	var leader, follower atomic.Int64
	if err := startRuntime("leader", &leader); err != nil {
		return err
	}
	var err error
	if r.leaderPerMin, r.leaderExecPerMin, err = measure(&leader); err != nil {
		return err
	}
	if err := startRuntime("follower", &follower); err != nil {
		return err
	}
	var both float64
	r.followerPerMin, both, err = measure(&follower)
	r.followerExecPerMin = both - r.leaderExecPerMin
	return err
}

// commandCounter counts the commands a client sends, each command of a
// pipeline included.
type commandCounter struct{ n *atomic.Int64 }

func (c commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

func (c commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// benchDuplicates runs three replica processes of asynq's Scheduler, then
// three of belfry, each with a per-second schedule, and counts enqueues per
// occurrence.
func benchDuplicates(addr string, s settings, r *results) error {
	measure := func(mode string, perOccurrence func([]enqueueEvent) (float64, int)) (float64, int, error) {
		logs := make([]*eventLog, 3)
		var procs []*replicaProc
		for i := range logs {
			logs[i] = newEventLog()
			p, err := startReplica(replicaConfig{mode: mode, redisAddr: addr, namespace: "bench-dup", queue: "bench-dup-" + mode,
				name: fmt.Sprintf("%s-%d", mode, i), ttl: runtime.LeaseTTLDefault}, logs[i])
			if err != nil {
				return 0, 0, err
			}
			procs = append(procs, p)
		}
		time.Sleep(3 * time.Second) // every replica has started
		from := time.Now()
		time.Sleep(s.dupWindow)
		to := time.Now()
		for _, p := range procs {
			p.stop()
		}
		var window []enqueueEvent
		for _, l := range logs {
			for _, e := range l.snapshot() {
				if e.at.After(from) && e.at.Before(to) {
					window = append(window, e)
				}
			}
		}
		ratio, occurrences := perOccurrence(window)
		return ratio, occurrences, nil
	}
	var err error
	r.dupAsynq, _, err = measure("asynq", func(evs []enqueueEvent) (float64, int) {
		ticks := map[int64]bool{}
		for _, e := range evs {
			ticks[e.at.Unix()] = true
		}
		return float64(len(evs)) / float64(max(len(ticks), 1)), len(ticks)
	})
	if err != nil {
		return err
	}
	r.dupBelfry, r.dupSlots, err = measure("belfry", func(evs []enqueueEvent) (float64, int) {
		ids := map[string]bool{}
		for _, e := range evs {
			ids[e.taskID] = true
		}
		return float64(len(evs)) / float64(max(len(ids), 1)), len(ids)
	})
	return err
}

func (r *results) print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "Next\tbelfry ns/op\tallocs\trobfig ns/op\tallocs\tratio")
	for _, row := range r.nextRows {
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "measure\tbelfry\tasynq Scheduler / plain loop\ttarget")
	fmt.Fprintf(tw, "redis-server CPU priority (both)\t%s\t\t\n", r.redisPriority)
	fmt.Fprintf(tw, "fire latency p50\t%s\t%s\t\n", ms(r.fireP50), ms(r.asynqP50))
	fmt.Fprintf(tw, "fire latency p99\t%s\t%s\t<= 10 ms, <= asynq + 5 ms\n", ms(r.fireP99), ms(r.asynqP99))
	fmt.Fprintf(tw, "fire latency, 3 slowest\t%s\t%s\t\n", durationsMs(r.fireTop), durationsMs(r.asynqTop))
	fmt.Fprintf(tw, "takeover after SIGKILL\t%.2f x TTL (%s)\t\t<= 1.05 x TTL\n", r.crashTTL, durations(r.crashDelays))
	fmt.Fprintf(tw, "takeover after SIGTERM\t%.3f s\t\t<= 0.5 s\n", r.graceful.Seconds())
	fmt.Fprintf(tw, "10,000 due at once, median\t%.3f s (%s)\t%.3f s (plain loop)\t<= 0.5 s, >= 2x loop\n", r.spike.Seconds(), durations(r.spikes), r.raw.Seconds())
	fmt.Fprintf(tw, "10,000 due at once, CPU median\tservice %.3f s, Redis %.3f s\t\t\n", r.spikeServiceCPU.Seconds(), r.spikeRedisCPU.Seconds())
	fmt.Fprintf(tw, "idle commands/min issued\tleader %.0f, follower %.0f\t\t<= 60, <= 12\n", r.leaderPerMin, r.followerPerMin)
	fmt.Fprintf(tw, "idle commands/min executed\tleader %.0f, follower %.0f\t\t(INFO commandstats: script internals too)\n", r.leaderExecPerMin, r.followerExecPerMin)
	fmt.Fprintf(tw, "enqueues per occurrence, 3 replicas\t%.2f (%d slots)\t%.2f\t1.00\n", r.dupBelfry, r.dupSlots, r.dupAsynq)
	fmt.Fprintf(tw, "fire lag across a New York fall-back, p50 / p99\t%s / %s (%d schedules, %d enqueues)\t\tp99 <= 50 ms\n",
		ms(r.dstP50), ms(r.dstP99), r.dstSchedules, r.dstOccurrences)
	fmt.Fprintf(tw, "that fall-back slot by slot: first enqueue p50, last p50 / p90\t%s, %s / %s after the slot\t\t\n",
		ms(r.dstFirstP50), ms(r.dstLastP50), ms(r.dstLastP90))
	fmt.Fprintf(tw, "that fall-back: heap allocated per enqueue, collections per slot\t%.0f B, %.2f\t\t\n",
		r.dstAllocPerEnqueue, r.dstGCPerSlot)
	for _, row := range r.scale {
		fmt.Fprintf(tw, "%d zoned schedules: takeover cold / warm, RSS\t%.0f / %.0f ms, %.2f kB per schedule\t\t<= 0.5 kB at 100k\n",
			row.schedules, msf(row.cold), msf(row.warm), row.rssKBPerSchedule)
	}
	fmt.Fprintf(tw, "slowest Redis call in those takeovers\t%s\t\t<= 5 ms\n", r.takeoverSlow)
	fmt.Fprintf(tw, "%d due at once: last enqueue (cursor) / last commit\t%.3f s / %.3f s after the slot\t\t<= 1 s\n",
		r.spikeLarge.schedules, r.spikeLarge.lastEnqueue.Seconds(), r.spikeLarge.commit.Seconds())
	fmt.Fprintf(tw, "slowest Redis call in that spike\t%s\t\t<= 5 ms\n", r.spikeLarge.slow)
	for _, l := range r.lint {
		fmt.Fprintf(tw, "go vet -vettool=cronlint, %d schedules\t%.2f s, %d MB max RSS, %d diagnostics, longest line %d B\t\t<= 5 s, <= 300 MB at 10k\n",
			l.schedules, l.wallS, l.maxRSSMB, l.diagnostics, l.longestLine)
	}
	for _, m := range []struct {
		what string
		run  memoryRun
	}{{"succeeding", r.memOK}, {"failing, retry=3", r.memFailing}} {
		fmt.Fprintf(tw, "Redis per per-second schedule, %s (%d)\t%.1f kB used_memory; %.0f tasks (%.0f archived) %.1f kB, %.0f records %.1f kB\t\t<= 30 kB (succeeding)\n",
			m.what, m.run.schedules, m.run.perSchedule/1000, m.run.tasks, m.run.archived, m.run.taskBytes/1000, m.run.records, m.run.ledgerBytes/1000)
	}
	f := r.family
	fmt.Fprintf(tw, "family of %d members in %d zones: takeover to first enqueue\t%.3f s\t\t<= 1 s\n", f.Members, f.Zones, f.Takeover.Seconds())
	fmt.Fprintf(tw, "family: %d members due in one zone, last enqueue after the slot\t%.3f s (%d beyond once per member and slot)\t\t<= 1 s, 0\n", f.SpikeMembers, f.Spike.Seconds(), f.Duplicates)
	fmt.Fprintf(tw, "family: bulk upsert\t%.0f members/s\t\t>= 5,000/s\n", f.Upserts)
	fmt.Fprintf(tw, "family: memory per member\tprocess %.0f B, Redis %.0f B\t\t<= 512 B each\n", f.ProcessBytesPerMember, f.RedisBytesPerMember)
	tw.Flush()
	r.admin.print(w)
	r.pg.print(w)
	r.cluster.print(w)
	spikeVsRaw := r.raw.Seconds() / cmp.Or(r.spike.Seconds(), 1e-9)
	fmt.Fprintf(w, "bench: next_vs_robfig=%.2f fire_p99_ms=%.1f asynq_fire_p99_ms=%.1f takeover_crash_ttl=%.2f takeover_graceful_s=%.2f spike10k_s=%.2f spike_vs_raw=%.1f leader_cmds_min=%.0f follower_cmds_min=%.0f dup_asynq=%.2f dup_belfry=%.2f",
		r.nextRatio, msf(r.fireP99), msf(r.asynqP99), r.crashTTL, r.graceful.Seconds(), r.spike.Seconds(), spikeVsRaw,
		r.leaderPerMin, r.followerPerMin, r.dupAsynq, r.dupBelfry)
	fmt.Fprintf(w, " cronlint10k_s=%.2f redis_kb_per_1s=%.1f rss_kb_per_sched=%.2f dst_fire_p99_ms=%.1f",
		r.lintSeconds(10000), r.memOK.perSchedule/1000, r.largestScale().rssKBPerSchedule, msf(r.dstP99))
	fmt.Fprintf(w, " admin100k_ms=%.0f %s%s%s", r.admin.ms100k(), r.family.summary(), r.pg.summary(), r.cluster.summary())
	fmt.Fprintln(w)
}

// lintSeconds is cronlint's wall time on the largest package of at most n
// schedules that was measured (the quick run's is smaller).
func (r *results) lintSeconds(n int) float64 {
	var best lintRow
	for _, l := range r.lint {
		if l.schedules <= n && l.schedules > best.schedules {
			best = l
		}
	}
	return best.wallS
}

// largestScale is the scaling run's largest size.
func (r *results) largestScale() scaleRow {
	var best scaleRow
	for _, row := range r.scale {
		if row.schedules > best.schedules {
			best = row
		}
	}
	return best
}

func msf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
func ms(d time.Duration) string   { return fmt.Sprintf("%.1f ms", msf(d)) }

func durationsMs(ds []time.Duration) string {
	var parts []string
	for _, d := range ds {
		parts = append(parts, fmt.Sprintf("%.1f", msf(d)))
	}
	return strings.Join(parts, " ") + " ms"
}

func durations(ds []time.Duration) string {
	var parts []string
	for _, d := range ds {
		parts = append(parts, fmt.Sprintf("%.2fs", d.Seconds()))
	}
	return strings.Join(parts, " ")
}
