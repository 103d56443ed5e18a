package runtime_test

import (
	"context"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/belfry/belfry/internal/redistest"
	"github.com/belfry/belfry/internal/testlog"
	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
	"github.com/hibiken/asynq"
)

// failoverRig is three runtimes and two asynq workers, each on its own
// Sentinel failover client, running a per-second schedule (and any other
// schedules the test asks for) on a Redis of the test's own (primary,
// replica, three sentinels).
type failoverRig struct {
	t        *testing.T
	ns       string
	s        *redistest.Sentinel
	rts      []*runtime.Runtime
	stops    []func()
	queue    string
	runs     *taskRuns
	schedule string
	reg      *registry.Registry
}

// taskRuns counts the handler's runs by task ID, as the workers see them:
// the counts come from what ran, not from what the runtimes claim.
type taskRuns struct {
	mu         sync.Mutex
	byID       map[string]int
	slotOf     map[string]time.Time
	scheduleOf map[string]string
}

func newTaskRuns() *taskRuns {
	return &taskRuns{byID: map[string]int{}, slotOf: map[string]time.Time{}, scheduleOf: map[string]string{}}
}

func (tr *taskRuns) handler(ctx context.Context, occ registry.Occurrence) error {
	id, _ := asynq.GetTaskID(ctx)
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.byID[id]++
	tr.slotOf[id] = occ.Slot
	tr.scheduleOf[id] = occ.Schedule
	return nil
}

// bySlot returns the runs of each slot of schedule and the task IDs that
// ran it.
func (tr *taskRuns) bySlot(schedule string) (runs map[int64]int, ids map[int64][]string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	runs, ids = map[int64]int{}, map[int64][]string{}
	for id, n := range tr.byID {
		if tr.scheduleOf[id] != schedule {
			continue
		}
		slot := tr.slotOf[id].Unix()
		runs[slot] += n
		ids[slot] = append(ids[slot], id)
	}
	return runs, ids
}

// newFailoverRig starts the rig; opts are the runtimes' (their Redis,
// namespace, replica names and logger are the rig's). extra are schedules
// beside the per-second one, on the same queue, each "name expr".
func newFailoverRig(t *testing.T, replicas int, sopts redistest.SentinelOptions, opts runtime.Options, extra ...string) *failoverRig {
	t.Helper()
	rig := &failoverRig{t: t, s: redistest.StartSentinel(t, sopts), queue: uniq("q"),
		runs: newTaskRuns(), schedule: "tick"}
	schedules := []registry.Schedule{{Name: rig.schedule, Expr: "* * * * * *", Queue: rig.queue, Handler: rig.runs.handler}}
	for _, e := range extra {
		name, expr, _ := strings.Cut(e, " ")
		schedules = append(schedules, registry.Schedule{Name: name, Expr: expr, Queue: rig.queue, Handler: rig.runs.handler})
	}
	reg := registry.MustNew(schedules...)
	rig.reg = reg
	opts.Namespace = uniq("ns")
	rig.ns = opts.Namespace
	for i := range replicas {
		o := opts
		o.Redis, o.Replica, o.Logger = rig.s.Client(t), "r"+strconv.Itoa(i), failoverLogger(t)
		rt, err := runtime.New(reg, o)
		if err != nil {
			t.Fatal(err)
		}
		rig.rts = append(rig.rts, rt)
	}
	for range 2 {
		startWorker(t, rig.s.Client(t), rig.queue, func(mux *asynq.ServeMux) { rig.rts[0].RegisterHandlers(mux) })
	}
	rig.run()
	return rig
}

// run runs the rig's runtimes until the test ends, or each its stop.
func (rig *failoverRig) run() {
	for _, rt := range rig.rts {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { rt.Run(ctx); close(done) }()
		rig.stops = append(rig.stops, sync.OnceFunc(func() { cancel(); <-done; rt.Close() }))
	}
	rig.t.Cleanup(func() {
		for _, stop := range rig.stops {
			stop()
		}
	})
}

// leader returns the index of the runtime that schedules, once one does.
func (rig *failoverRig) leader() int {
	rig.t.Helper()
	i := -1
	waitFor(rig.t, 10*time.Second, "a runtime to schedule", func() bool {
		for j, rt := range rig.rts {
			if rt.Scheduling() {
				i = j
				return true
			}
		}
		return false
	})
	return i
}

// failoverLogger logs warnings and errors only: a failover makes every
// replica log its Redis errors, and the interesting lines are the losses.
func failoverLogger(t testing.TB) *slog.Logger {
	return testlog.New(t, slog.LevelWarn)
}

// waitRun waits until some slot after `after` has run: scheduling goes on.
func (rig *failoverRig) waitRun(within time.Duration, after time.Time) {
	rig.t.Helper()
	waitFor(rig.t, within, "a slot after "+after.Format(time.TimeOnly)+" to run", func() bool {
		runs, _ := rig.runs.bySlot(rig.schedule)
		for slot := range runs {
			if time.Unix(slot, 0).After(after) {
				return true
			}
		}
		return false
	})
}

// verdict counts, over the slots from `from` to `to`, the slots that ran
// more than once (duplicates: the extra runs) and those that never ran
// (missed), leaving out the slots inside a loss the runtimes detected.
// It first waits until every slot has run or the runtimes moved 5 s past
// `to`, so a late duplicate is counted too.
func (rig *failoverRig) verdict(ctx context.Context, from, to time.Time) (duplicates, missed int, lost []runtime.LostWrites) {
	rig.t.Helper()
	rig.waitRun(30*time.Second, to.Add(5*time.Second))
	lost, err := rig.rts[0].Redis().LostWrites(ctx)
	if err != nil {
		rig.t.Fatalf("reading the detected losses: %v", err)
	}
	var inWindow, occurrences int
	for _, s := range rig.reg.Schedules() {
		runs, ids := rig.runs.bySlot(s.Name)
		for slot := s.Next(from.Add(-time.Second)); !slot.After(to); slot = s.Next(slot) {
			n := runs[slot.Unix()]
			occurrences++
			if inLostWindow(lost, slot) {
				inWindow++
				continue
			}
			switch {
			case n == 0:
				missed++
				rig.t.Logf("missed: %s slot %s", s.Name, slot.UTC().Format(time.TimeOnly))
			case n > 1:
				duplicates += n - 1
				rig.t.Logf("duplicate: %s slot %s ran %d times (task IDs %v)", s.Name, slot.UTC().Format(time.TimeOnly), n, ids[slot.Unix()])
			}
		}
	}
	rig.t.Logf("slots %s..%s: %d occurrences, duplicates=%d missed=%d, %d in %d detected loss windows %+v",
		from.UTC().Format(time.TimeOnly), to.UTC().Format(time.TimeOnly), occurrences, duplicates, missed, inWindow, len(lost), lost)
	return duplicates, missed, lost
}

// failoversFromEnv is how many failovers the repeated-failover tests make:
// BELFRY_SENTINEL_FAILOVERS, by default short in make test and long in make
// test/long (each failover waits on Sentinel's own timing).
func failoversFromEnv(t *testing.T, short, long int) int {
	n := short
	if *longFlag {
		n = long
	}
	if v := os.Getenv("BELFRY_SENTINEL_FAILOVERS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("BELFRY_SENTINEL_FAILOVERS=%q: want a positive number", v)
		}
	}
	return n
}

// The failovers of a routine Redis deploy, with the runtimes' default
// options on Sentinel clients and the servers' own defaults (no
// min-replicas-to-write; a full resync after a delay): three runtimes, a
// per-second, a 2 s and a 5 s schedule, a LeaseTTL of 2 s, forced
// failovers one after another, the second promoting the first one's old
// primary before it caught up. Every occurrence runs exactly once, and no
// loss is recorded: a failover client waits for a replica's
// acknowledgement by default, nobody leads while the primary has no
// replica, and an occurrence whose unacknowledged enqueue a failover took
// before any attempt started is enqueued again. Without acknowledgements
// the second failover loses the writes made since the first: the loss is
// detected, and its window's slots do not run.
func TestSentinelFailoversWithDefaultOptionsRunEveryOccurrenceOnce(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rig := newFailoverRig(t, 3, redistest.SentinelOptions{ResyncDelay: 3 * time.Second}, runtime.Options{LeaseTTL: 2 * time.Second},
		"every-2s */2 * * * * *", "every-5s */5 * * * * *")
	rig.waitRun(20*time.Second, time.Time{})
	from := time.Now().Truncate(time.Second).Add(time.Second)
	failovers := failoversFromEnv(t, 2, 2)
	// Each failover as soon as the sentinels accept it: once they see the
	// previous one's old primary as a replica, which has not caught up
	// yet (a full resync starts after ResyncDelay, as by default).
	for i := range failovers {
		old, err := rig.s.Failover(ctx)
		if err != nil {
			t.Fatalf("failover %d: %v", i+1, err)
		}
		t.Logf("failover %d: %s is no longer primary", i+1, old.Addr)
	}
	// Nobody leads until Sentinel has turned the old primary into the new
	// one's replica and the resync has finished: Sentinel's timers and a
	// full resync, which a busy machine stretches, not belfry's; the wait
	// ends at the first run.
	rig.waitRun(60*time.Second, time.Now())
	to := time.Now().Truncate(time.Second)
	if err := rig.s.WaitSynced(ctx); err != nil {
		t.Fatalf("after the failovers: %v", err)
	}
	duplicates, missed, lost := rig.verdict(ctx, from, to)
	if duplicates != 0 || missed != 0 || len(lost) != 0 {
		t.Errorf("over %d failovers with default options: duplicates=%d missed=%d detected losses=%d; want 0, 0 and none",
			failovers, duplicates, missed, len(lost))
	}
}

// Repeated forced failovers (SENTINEL FAILOVER: no wait for the replica to
// catch up) under three replicas and real workers, with ReplicaAcks=1:
// every slot runs exactly once, and no loss of data was ever detected,
// since no write a replica had not acknowledged was counted.
func TestSentinelFailoversWithReplicaAcksRunEverySlotOnce(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rig := newFailoverRig(t, 3, redistest.SentinelOptions{MinReplicasToWrite: 1}, runtime.Options{ReplicaAcks: 1})
	rig.waitRun(20*time.Second, time.Time{})
	from := time.Now().Truncate(time.Second).Add(time.Second)
	for i := range failoversFromEnv(t, 1, 3) {
		old, err := rig.s.Failover(ctx)
		if err != nil {
			t.Fatalf("failover %d: %v", i+1, err)
		}
		t.Logf("failover %d: %s is no longer primary", i+1, old.Addr)
		rig.waitRun(20*time.Second, time.Now())
		if err := rig.s.WaitSynced(ctx); err != nil {
			t.Fatalf("after failover %d: %v", i+1, err)
		}
	}
	to := time.Now().Truncate(time.Second)
	duplicates, missed, lost := rig.verdict(ctx, from, to)
	if duplicates != 0 || missed != 0 || len(lost) != 0 {
		t.Errorf("over %d failovers: duplicates=%d missed=%d detected losses=%d; want 0, 0 and none", failoversFromEnv(t, 1, 3), duplicates, missed, len(lost))
	}
}

// The same failovers with ReplicaAcks alone, the servers without
// min-replicas-to-write: the old primary takes the enqueue of the slot due
// at the failover, no replica acknowledges it, and a worker still on the
// old primary may run it. The leader does not enqueue that slot again on
// the new primary, where its task is gone: it records the slot as lost
// (a window of one slot that may not have run). No slot runs twice. This
// holds when the leader that made the write is the one that retries it:
// with the default LeaseTTL its lease outlives the failover (Sentinel
// converts the old primary, the new one's only replica, after about 8 s;
// until then nothing is acknowledged and nobody leads).
func TestSentinelFailoversWithReplicaAcksAloneRunNoSlotTwice(t *testing.T) {
	longTest(t)
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rig := newFailoverRig(t, 3, redistest.SentinelOptions{}, runtime.Options{ReplicaAcks: 1})
	rig.waitRun(20*time.Second, time.Time{})
	from := time.Now().Truncate(time.Second).Add(time.Second)
	for i := range failoversFromEnv(t, 1, 3) {
		if _, err := rig.s.Failover(ctx); err != nil {
			t.Fatalf("failover %d: %v", i+1, err)
		}
		rig.waitRun(20*time.Second, time.Now())
		if err := rig.s.WaitSynced(ctx); err != nil {
			t.Fatalf("after failover %d: %v", i+1, err)
		}
	}
	to := time.Now().Truncate(time.Second)
	duplicates, missed, lost := rig.verdict(ctx, from, to)
	if duplicates != 0 || missed != 0 {
		t.Errorf("over %d failovers: duplicates=%d missed=%d outside %d detected losses; want 0 and 0", failoversFromEnv(t, 1, 3), duplicates, missed, len(lost))
	}
	for _, l := range lost {
		if !l.From.Equal(l.To) {
			t.Errorf("a loss of more than one slot: %+v", l)
		}
	}
}

// A failover, then a SIGKILL of the new primary before the old one (now
// its replica) has resynced: Sentinel promotes a replica that lacks what
// the new primary took. With ReplicaAcks=1 nothing the leader counted was
// on the killed primary alone, so no slot runs twice and none is missed.
func TestSentinelFailoverThenKillWithReplicaAcks(t *testing.T) {
	longTest(t)
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rig := newFailoverRig(t, 3, redistest.SentinelOptions{MinReplicasToWrite: 1}, runtime.Options{ReplicaAcks: 1})
	rig.waitRun(20*time.Second, time.Time{})
	from := time.Now().Truncate(time.Second).Add(time.Second)
	if _, err := rig.s.Failover(ctx); err != nil {
		t.Fatal(err)
	}
	// Kill the new primary while the old one is still being converted.
	killed, err := rig.s.KillPrimary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := rig.s.WaitNewPrimary(ctx, killed); err != nil {
		t.Fatal(err)
	}
	killed.Start()
	if err := rig.s.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	to := time.Now().Truncate(time.Second)
	duplicates, missed, lost := rig.verdict(ctx, from, to)
	if duplicates != 0 || missed != 0 {
		t.Errorf("failover then SIGKILL: duplicates=%d missed=%d (detected losses %+v); want 0 and 0 outside them", duplicates, missed, lost)
	}
}

// Without ReplicaAcks a failover can lose what the leader counted as done.
// Here the replica stalls (SIGSTOP) and loses its link, the leader hands over on shutdown,
// the new leader takes a new token and schedules slots that workers run,
// all on the primary alone; then the primary is killed and Sentinel
// promotes the stalled replica. The token counter went back, and the new
// leader's next acquire hands it the very token, and lease value, it held
// before. That is noticed: the loss is recorded, the cursors move past it,
// and no slot runs twice.
func TestSentinelLostWritesWithoutReplicaAcksAreDetected(t *testing.T) {
	longTest(t)
	t.Parallel()
	// The fault is staged with real processes and Sentinel's own timing,
	// and on a loaded machine it sometimes loses nothing (the sentinels
	// promote a replica that had the writes after all, or fail over on
	// their own first): the new primary's token counter then says so, and
	// the test stages it again on a fresh rig rather than ask the runtime
	// to detect a loss that did not happen.
	const stagings = 3
	for try := 1; try <= stagings; try++ {
		var staged bool
		if !t.Run("staging "+strconv.Itoa(try), func(t *testing.T) { staged = stageLostWritesAndDetect(t) }) || staged {
			return // failed, or a loss was staged and detected
		}
	}
	t.Fatalf("in %d stagings the failover never lost a write: nothing was tested", stagings)
}

// stageLostWritesAndDetect stages the loss (see above), reports whether
// the failover lost writes, and if it did, checks that the loss is
// detected. When it lost nothing it skips, with the tokens it saw.
func stageLostWritesAndDetect(t *testing.T) (staged bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rig := newFailoverRig(t, 2, redistest.SentinelOptions{}, runtime.Options{LeaseTTL: 2 * time.Second, SkewMargin: 2 * time.Second,
		ReplicaAcks: runtime.ReplicaAcksOff})
	first := rig.leader()
	next := rig.rts[1-first]
	rig.waitRun(20*time.Second, time.Time{})
	waitFor(t, 10*time.Second, "the follower to know the store", next.KnowsEpoch)
	from := time.Now().Truncate(time.Second).Add(time.Second)
	// The primary now, not the first server: on a loaded machine (CI's
	// -race step) the sentinels can fail over on their own before this
	// point, and pausing the primary instead of its replica tests nothing.
	primary, err := rig.s.Primary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	replica := rig.s.Servers[0]
	if replica == primary {
		replica = rig.s.Servers[1]
	}

	replica.Pause()
	// The stalled replica would still read what reached its socket's
	// buffer on waking: the primary drops it, so nothing written from
	// now on reaches it.
	if err := primary.Client(t).ClientKillByFilter(ctx, "TYPE", "replica").Err(); err != nil {
		t.Fatal(err)
	}
	// Written after the cut and before the new token: a new primary that
	// has it got every write since, and nothing was lost.
	marker := uniq("cut")
	if err := primary.Client(t).Set(ctx, marker, "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	rig.stops[first]() // a graceful handover: the follower leads at once, with a new token
	waitFor(t, 10*time.Second, "the follower to schedule", next.Scheduling)
	rig.waitRun(10*time.Second, time.Now().Add(2*time.Second))
	primary.Kill()
	replica.Resume()
	if err := rig.s.WaitNewPrimary(ctx, primary); err != nil {
		t.Fatal(err)
	}
	promoted, err := rig.s.Primary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := promoted.Client(t).Exists(ctx, marker).Result(); err != nil {
		t.Fatal(err)
	} else if n == 1 {
		t.Skip("the failover lost nothing (the new primary has what was written after the cut): staged again")
	}
	staged = true
	var lost []runtime.LostWrites
	deadline := time.Now().Add(60 * time.Second) // under -race and load a re-dial through the sentinels is slow
	for lost, _ = next.Redis().LostWrites(ctx); len(lost) == 0; lost, _ = next.Redis().LostWrites(ctx) {
		if time.Now().After(deadline) {
			state, err := next.Redis().State()
			t.Fatalf("the loss was not detected within 60s; the follower's Redis is %s (%v), scheduling %v", state, err, next.Scheduling())
		}
		time.Sleep(50 * time.Millisecond) // polls the detection; the deadline is the assertion
	}
	t.Logf("detected: %+v", lost[0])
	primary.Start() // back as a replica of the new primary
	if err := rig.s.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	to := time.Now().Truncate(time.Second)
	duplicates, missed, _ := rig.verdict(ctx, from, to)
	if duplicates != 0 || missed != 0 {
		t.Errorf("after a detected loss: duplicates=%d missed=%d outside the detected window; want 0 and 0", duplicates, missed)
	}
	return staged
}

// The cost of ReplicaAcks per dispatch: one runtime on a failover client
// with a per-second schedule, each op one scheduled slot, reporting how
// long after its slot the occurrence was enqueued and committed (the
// event's Lag) with and without acknowledgements. Run it with
// -benchtime=30x: every op waits for a slot.
func BenchmarkDispatchReplicaAcks(b *testing.B) {
	for _, acks := range []int{runtime.ReplicaAcksOff, 1} {
		b.Run("acks="+strconv.Itoa(max(acks, 0)), func(b *testing.B) {
			s := redistest.StartSentinel(b, redistest.SentinelOptions{})
			reg := registry.MustNew(registry.Schedule{Name: "tick", Expr: "* * * * * *", Queue: uniq("q"),
				Handler: func(context.Context, registry.Occurrence) error { return nil }})
			rt, err := runtime.New(reg, runtime.Options{Redis: s.Client(b), Namespace: uniq("ns"), ReplicaAcks: acks,
				Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				b.Fatal(err)
			}
			lags := make(chan time.Duration, 100)
			rt.Observe(func(e runtime.Event) {
				if e.Outcome == runtime.OutcomeEnqueued && !e.Manual {
					select {
					case lags <- e.Lag:
					default:
					}
				}
			})
			runUntilTheEnd(b, rt)
			<-lags // the first slot after taking the lease
			var got []time.Duration
			for b.Loop() {
				got = append(got, <-lags)
			}
			slices.Sort(got)
			b.ReportMetric(float64(got[len(got)/2].Microseconds())/1000, "lag_p50_ms")
			b.ReportMetric(float64(got[len(got)*9/10].Microseconds())/1000, "lag_p90_ms")
		})
	}
}

// A RedisURL with master_name is a Sentinel URL: the runtime's own client
// asks the sentinels for the primary and follows it through a failover.
func TestRedisURLWithMasterNameFollowsTheSentinels(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := redistest.StartSentinel(t, redistest.SentinelOptions{})
	url := "redis://" + s.SentinelAddrs[0] + "?master_name=" + redistest.SentinelMasterName +
		"&addr=" + s.SentinelAddrs[1] + "&addr=" + s.SentinelAddrs[2] + "&dial_timeout=200ms"
	rt, err := runtime.New(registry.MustNew(idleSchedule()), runtime.Options{RedisURL: url, Namespace: uniq("ns"),
		LeaseTTL: 2 * time.Second, ReplicaAcks: 1, Logger: failoverLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	runUntilTheEnd(t, rt)
	waitFor(t, 10*time.Second, "the runtime to lead through the sentinels", rt.Leadership().Leading)
	if _, err := s.Failover(ctx); err != nil {
		t.Fatal(err)
	}
	primary, err := s.Primary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the runtime to lead on the new primary", func() bool {
		info, err := rt.RedisClient().Info(ctx, "server").Result()
		return err == nil && strings.Contains(info, "tcp_port:"+primary.Addr[strings.LastIndexByte(primary.Addr, ':')+1:]+"\r") && rt.Leadership().Leading()
	})
}

// ReplicaAcks and its timeout are checked with the other options, with
// messages that say what to set.
func TestReplicaAcksOptionsAreValidated(t *testing.T) {
	t.Parallel()
	reg := registry.MustNew(idleSchedule())
	for _, tt := range []struct {
		opts runtime.Options
		want string // "" for valid
	}{
		{runtime.Options{ReplicaAcks: 1}, ""},
		{runtime.Options{ReplicaAcks: 2, ReplicaAckTimeout: 200 * time.Millisecond}, ""},
		{runtime.Options{ReplicaAcks: runtime.ReplicaAcksOff}, ""},
		{runtime.Options{ReplicaAcks: -2}, "ReplicaAcks must be the number of replicas to wait for, 0 (the default"},
		{runtime.Options{ReplicaAcks: 1, ReplicaAckTimeout: 5 * time.Second}, "ReplicaAckTimeout must be at least 1ms and below LeaseTTL/3 (5s); got 5s"},
		{runtime.Options{ReplicaAcks: 1, ReplicaAckTimeout: time.Microsecond}, "ReplicaAckTimeout must be at least 1ms"},
		// The core's options are checked first: the fault named is the
		// one to correct, not the ReplicaAckTimeout that follows from it.
		{runtime.Options{ReplicaAcks: 1, LeaseTTL: 2 * time.Millisecond}, "LeaseTTL must be at least 1s; got 2ms"},
		{runtime.Options{ReplicaAcks: -2, HistoryLimit: -5}, "HistoryLimit must be between 1 and 10000; got -5"},
	} {
		tt.opts.RedisURL = "redis://" + sharedRedisAddr()
		rt, err := runtime.New(reg, tt.opts)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%+v: %v, want valid", tt.opts, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("ReplicaAcks=%d ReplicaAckTimeout=%s: error %v, want %q", tt.opts.ReplicaAcks, tt.opts.ReplicaAckTimeout, err, tt.want)
		}
		if rt != nil {
			rt.Close()
		}
	}
}

// A rediss:// RedisURL speaks TLS: the runtime leads on a Redis that
// accepts nothing else. (skip_verify, since the test's certificate is its
// own; a service's URL verifies the server against the system's roots.)
func TestRedissURLSpeaksTLS(t *testing.T) {
	t.Parallel()
	addr := redistest.StartTLS(t)
	rt, err := runtime.New(registry.MustNew(idleSchedule()), runtime.Options{RedisURL: "rediss://" + addr + "/0?skip_verify=true",
		Namespace: uniq("ns"), LeaseTTL: time.Second, Logger: failoverLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	runUntilTheEnd(t, rt)
	waitFor(t, 10*time.Second, "the runtime to lead over TLS", rt.Leadership().Leading)
	plain, err := runtime.New(registry.MustNew(idleSchedule()), runtime.Options{RedisURL: "redis://" + addr + "/0", Namespace: uniq("ns")})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if err := plain.RedisClient().Ping(context.Background()).Err(); err == nil {
		t.Error("a plain redis:// client reached the TLS-only server; the test proves nothing")
	}
}

// A Sentinel URL that does not parse is explained by the Sentinel
// parser, not the plain one (which knows no master_name), and without its
// password.
func TestABadSentinelURLSaysWhy(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ url, want string }{
		{"redis://user:hunter2@127.0.0.1:26379?master_name=m&bogus=1", "bogus"},
		{"redis://user:hunt/er2@127.0.0.1:26379?master_name=m", "not valid in a URL"},
	} {
		_, err := runtime.New(registry.MustNew(idleSchedule()), runtime.Options{RedisURL: tt.url})
		switch {
		case err == nil:
			t.Errorf("RedisURL %q parsed", tt.url)
		case strings.Contains(err.Error(), "hunt") || strings.Contains(err.Error(), "er2"):
			t.Errorf("RedisURL %q: error %q shows the password", tt.url, err)
		case !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "unexpected option: master_name"):
			t.Errorf("RedisURL %q: error %q, want it to name %q", tt.url, err, tt.want)
		}
	}
}
