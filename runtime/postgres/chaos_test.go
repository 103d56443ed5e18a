package postgres_test

import (
	"bufio"
	"cmp"
	"context"
	"flag"
	"fmt"
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

	"github.com/belfry/belfry/internal/netfault"
	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/checkpoint"
	"github.com/belfry/belfry/runtime/core"
	"github.com/belfry/belfry/runtime/internal/chaoskit"
	"github.com/belfry/belfry/runtime/internal/clock"
	"github.com/belfry/belfry/runtime/internal/corehook"
	"github.com/belfry/belfry/runtime/postgres"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
)

// The Postgres chaos harness is opt-in, as the Redis one in package
// runtime is: it takes minutes and starts processes and a PostgreSQL
// server of its own, so it runs only under `CHAOS_ENGINE=postgres make
// chaos`, never in `go test ./...`. It has the Redis harness's shape:
// replicas are this test binary re-executed, each reaching the database
// through a fault proxy of its own; every execution is appended by the
// handler to a file of its process; the judgement is made from those
// files, never from what the runtime says of itself.
var (
	chaosFlag    = flag.Bool("chaos", false, "run the chaos harness (CHAOS_ENGINE=postgres make chaos)")
	chaosSummary = flag.String("chaos.summary", "", "also write the chaos summary line to this file")
)

// The variables that make this binary a replica instead of a test run.
const (
	envChaosReplica = "BELFRY_PGCHAOS_REPLICA"
	envChaosURL     = "BELFRY_PGCHAOS_URL"
	envChaosOffset  = "BELFRY_PGCHAOS_OFFSET"
	envChaosRecord  = "BELFRY_PGCHAOS_RECORD"
	envChaosTTL     = "BELFRY_PGCHAOS_TTL"
	envChaosGrace   = "BELFRY_PGCHAOS_GRACE"
	envChaosSkew    = "BELFRY_PGCHAOS_SKEW_MARGIN"
	// envChaosBatchItems is the size of the checkpointed long job.
	envChaosBatchItems = "BELFRY_PGCHAOS_BATCH_ITEMS"
)

const (
	pgChaosNamespace = "chaos"
	pgChaosQueue     = "chaos"
	pgChaosDatabase  = "belfry_chaos"
	pgChaosFamily    = "family"
	// pgChaosPaused is the schedule an operator pauses and resumes mid-run.
	pgChaosPaused = "every-2s"
)

// pgChaosSchedules are what every replica serves and what the harness
// counts: per-second schedules make a lost or doubled slot visible within
// a second of any fault; batch runs the checkpointed long job
// (chaoskit.BatchSchedule).
func pgChaosSchedules(h, batch registry.HandlerFunc) *registry.Registry {
	var scheds []registry.Schedule
	for _, e := range []struct{ name, expr string }{
		{"every-1s", "* * * * * *"},
		{"every-2s", "*/2 * * * * *"},
		{"every-5s", "*/5 * * * * *"},
		{"every-1m", "* * * * *"},
	} {
		scheds = append(scheds, registry.Schedule{Name: e.name, Expr: e.expr, Queue: pgChaosQueue,
			Timeout: 10 * time.Second, MaxRetry: 5, Handler: h})
	}
	scheds = append(scheds, registry.Schedule{Name: pgChaosFamily, Expr: "* * * * * *", Per: "tenant", Queue: pgChaosQueue,
		Timeout: 10 * time.Second, MaxRetry: 5, Handler: h})
	scheds = append(scheds, registry.Schedule{Name: chaoskit.BatchSchedule, Expr: chaoskit.BatchExpr, Queue: pgChaosQueue,
		Timeout: chaoskit.BatchTimeout, MaxRetry: 25, Handler: batch})
	return registry.MustNew(scheds...)
}

// pgChaosMembers are the family's members: zones with odd offsets; the
// last is deleted mid-run.
var pgChaosMembers = []core.Member{
	{Key: "tenant-00", Zone: "Asia/Kathmandu"},
	{Key: "tenant-01", Zone: "Australia/Lord_Howe"},
	{Key: "tenant-02", Zone: "America/St_Johns"},
	{Key: "tenant-03", Zone: "Pacific/Chatham"},
}

// TestChaosPostgresReplica is the body of a replica process; run directly
// it skips.
func TestChaosPostgresReplica(t *testing.T) {
	name := os.Getenv(envChaosReplica)
	if name == "" {
		t.Skip("replica process of TestChaosPostgres; runs only when TestChaosPostgres starts it")
	}
	if err := runPGChaosReplica(name); err != nil {
		t.Fatal(err)
	}
}

// jobIDKey carries the River job's ID to the handler, which records it:
// two IDs for one slot are two enqueues, two runs of one ID a redelivery.
type jobIDKey struct{}

func runPGChaosReplica(name string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	durations := map[string]time.Duration{}
	for _, env := range []string{envChaosOffset, envChaosTTL, envChaosGrace, envChaosSkew} {
		d, err := time.ParseDuration(os.Getenv(env))
		if err != nil {
			return fmt.Errorf("%s: %v", env, err)
		}
		durations[env] = d
	}
	ttl := durations[envChaosTTL]
	// One file per process, one write per execution: it survives a
	// SIGKILL (the page cache is the kernel's) and every database fault.
	// A line is "<name> <slot> <attempt> <job id> <replica> <pid> <began, Unix ns>".
	rec, err := os.OpenFile(os.Getenv(envChaosRecord), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer rec.Close()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	items, err := strconv.Atoi(os.Getenv(envChaosBatchItems))
	if err != nil {
		return fmt.Errorf("%s: %v", envChaosBatchItems, err)
	}
	blog, err := chaoskit.OpenBatchLog(filepath.Dir(os.Getenv(envChaosRecord)), name)
	if err != nil {
		return err
	}
	defer blog.Close()
	pid := os.Getpid()
	var eng *postgres.Engine
	var pool *pgxpool.Pool
	reg := pgChaosSchedules(func(ctx context.Context, occ registry.Occurrence) error {
		attempt, _, _ := eng.Attempt(ctx)
		jobID, _ := ctx.Value(jobIDKey{}).(int64)
		line := fmt.Sprintf("%s %d %d %d %s %d %d\n", pgChaosRecordName(occ), occ.Slot.Unix(), attempt, jobID, name, pid, time.Now().UnixNano())
		if _, err := rec.WriteString(line); err != nil {
			log.Error("chaos: recording an execution failed; the count will be short", "occ", occ.ID, "err", err)
		}
		return nil // every execution counts, so none is retried for failing
	}, func(ctx context.Context, occ registry.Occurrence) error {
		attempt, _, _ := eng.Attempt(ctx)
		return pgBatchHandler(ctx, pool, blog, items, attempt)
	})

	cfg, err := pgxpool.ParseConfig(os.Getenv(envChaosURL))
	if err != nil {
		return err
	}
	cfg.MaxConns = 16
	cfg.ConnConfig.ConnectTimeout = time.Second
	// A statement waits on a lock for at most a lease TTL: what a
	// service on a shared database sets so that a stuck lock fails calls
	// instead of hanging them (the lock stalls hold a lock that long).
	cfg.ConnConfig.RuntimeParams["statement_timeout"] = strconv.FormatInt(ttl.Milliseconds(), 10)
	pool, err = pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	eng, err = postgres.New(postgres.Config{Pool: pool})
	if err != nil {
		return err
	}
	built, err := corehook.NewWithClock(reg, core.Options{Engine: eng, Namespace: pgChaosNamespace, Replica: name,
		LeaseTTL: ttl, Grace: durations[envChaosGrace], SkewMargin: durations[envChaosSkew], Logger: log},
		clock.Offset(durations[envChaosOffset]))
	if err != nil {
		return err
	}
	rt := built.(*core.Runtime)
	defer rt.Close()
	workers := river.NewWorkers()
	if err := postgres.AddWorkers(workers, rt); err != nil {
		return err
	}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues: map[string]river.QueueConfig{pgChaosQueue: {MaxWorkers: 8}}, Workers: workers,
		Logger: log.With("component", "river"), FetchCooldown: 10 * time.Millisecond, FetchPollInterval: 100 * time.Millisecond,
		// A job orphaned by a SIGKILLed worker is rescued soon, and a
		// failed one retried soon, so the drain does not wait long.
		JobTimeout: 10 * time.Second, RescueStuckJobsAfter: 15 * time.Second, RetryPolicy: secondRetry{},
		Middleware: []rivertype.Middleware{river.WorkerMiddlewareFunc(
			func(ctx context.Context, job *rivertype.JobRow, doInner func(context.Context) error) error {
				return doInner(context.WithValue(ctx, jobIDKey{}, job.ID))
			})},
	})
	if err != nil {
		return err
	}
	// River's Start fails while the database is unreachable (a replica
	// started into a partition or a server restart); it is tried again,
	// as a supervisor would restart the process, while the runtime runs.
	started := make(chan bool, 1)
	go func() {
		for {
			err := client.Start(ctx)
			if err == nil || ctx.Err() != nil {
				started <- err == nil
				return
			}
			log.Warn("chaos: River client did not start; trying again", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	log.Info("chaos replica up", "pid", pid, "clock_offset", durations[envChaosOffset])
	runErr := rt.Run(ctx)
	if <-started {
		stopCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if client.Stop(stopCtx) != nil {
			// A job still running (the long job) is cancelled, as a deploy
			// does: it saves its place and continues elsewhere.
			cancelCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			client.StopAndCancel(cancelCtx)
		}
	}
	log.Info("chaos replica down", "pid", pid)
	return runErr
}

// pgBatchTable holds one row per processing of an item of the long job:
// the handler's own effects, which the harness counts.
const pgBatchTable = "chaos_batch_item"

// pgBatchHandler is the long job's handler on Postgres: each batch inserts
// its items' rows and saves its checkpoint in one transaction
// (postgres.SaveCheckpoint), so every item is processed exactly once,
// whatever interrupts the run.
func pgBatchHandler(ctx context.Context, pool *pgxpool.Pool, blog *chaoskit.BatchLog, items, attempt int) error {
	blog.Attempt()
	err := checkpoint.Run(ctx, chaoskit.BatchStep(items, func(ctx context.Context, from, to int) error {
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO `+pgBatchTable+` (item, attempt) SELECT generate_series($1::int, $2::int - 1), $3`,
				from, to, attempt); err != nil {
				return err
			}
			return postgres.SaveCheckpoint(ctx, tx, strconv.Itoa(to), to == items)
		})
		if err == nil {
			blog.Batch(from, to) // which worker runs the job; the table is the count
		}
		return err
	}))
	if err == nil {
		blog.Done()
	}
	return err
}

// secondRetry retries a failed job a second later.
type secondRetry struct{}

func (secondRetry) NextRetry(*rivertype.JobRow) time.Time { return time.Now().Add(time.Second) }

// pgChaosRecordName is the name an execution is recorded under: a
// member's own for a family.
func pgChaosRecordName(occ registry.Occurrence) string {
	if occ.Member != "" {
		return occ.Schedule + "/" + occ.Member
	}
	return occ.Schedule
}

// pgChaosFaults are the fault kinds CHAOS_FAULTS selects from when
// CHAOS_ENGINE=postgres (a comma list; by default every one). Clock skew
// is not a kind: the replicas always run ±CHAOS_SKEW apart.
//
//	kill       SIGKILL the planning replica, restart it shortly after
//	pause      SIGSTOP the planning replica for longer than its lease (a zombie)
//	partition  black-hole the planner's link to Postgres for several TTLs,
//	           then heal it (what was sent into the partition is delivered late)
//	terminate  pg_terminate_backend of every connection of belfry's database
//	restart    stop the private PostgreSQL (fast or immediate) and start it again
//	lockstall  a transaction holds an exclusive lock on belfry's slot or
//	           lease table for the replicas' statement_timeout or longer
var pgChaosFaults = []string{"kill", "pause", "partition", "terminate", "restart", "lockstall"}

// pgChaosReplica is one replica slot; each restart is a new process (an
// incarnation with its own name and record file). Its proxy is kept
// across incarnations, so a network fault hits exactly one replica.
type pgChaosReplica struct {
	chaoskit.Proc
	idx, incarnation int
	offset           time.Duration
	proxy            *netfault.Proxy
}

type pgChaosHarness struct {
	t      *testing.T
	cfg    chaoskit.Config
	dir    string
	exe    string
	server *privatePostgres
	db     *pgxpool.Pool

	mu       sync.Mutex // guards the replicas' states and the counts
	replicas []*pgChaosReplica
	followUp sync.WaitGroup

	kills, pauses, partitions, terminations, restarts, lockStalls int
	// batchItems is the size of the checkpointed long job.
	batchItems int
}

func (h *pgChaosHarness) logf(format string, args ...any) {
	h.t.Logf("%s "+format, append([]any{time.Now().Format("15:04:05.000")}, args...)...)
}

func TestChaosPostgres(t *testing.T) {
	if !*chaosFlag {
		t.Skip("chaos harness is opt-in: run `CHAOS_ENGINE=postgres make chaos`")
	}
	cfg := chaoskit.FromEnv(t, pgChaosFaults)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := cfg.EvidenceDir(t, "belfry-pgchaos-")
	h := &pgChaosHarness{t: t, cfg: cfg, dir: dir, exe: exe}
	faults := cfg.Selected(pgChaosFaults)
	t.Logf("chaos: engine=postgres seed=%d replicas=%d duration=%s lease_ttl=%s grace=%s skew=±%s faults=%s dir=%s",
		cfg.Seed, cfg.Replicas, cfg.Duration, cfg.TTL, cfg.Grace, cfg.Skew, strings.Join(faults, ","), dir)

	h.server = startPrivatePostgres(t, filepath.Join(dir, "server"))
	h.server.CreateDatabase(pgChaosDatabase)
	ctx := context.Background()
	pcfg, err := pgxpool.ParseConfig(h.server.URL("", pgChaosDatabase))
	if err != nil {
		t.Fatal(err)
	}
	pcfg.ConnConfig.ConnectTimeout = time.Second
	// Named, so that the terminations spare the harness's own connections.
	pcfg.ConnConfig.RuntimeParams["application_name"] = "belfry-chaos-harness"
	if h.db, err = pgxpool.NewWithConfig(ctx, pcfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.db.Close)
	if _, err := postgres.Migrate(ctx, h.db, postgres.MigrateOptions{River: true}); err != nil {
		t.Fatalf("migrating: %v", err)
	}
	t.Cleanup(h.killAll) // only on a failure path; a normal run stops them first

	noop := func(context.Context, registry.Occurrence) error { return nil }
	reg := pgChaosSchedules(noop, noop)
	if _, err := h.db.Exec(ctx, `CREATE TABLE `+pgBatchTable+` (item int NOT NULL, attempt int NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	// The long job starts while the faults go on, and is stopped and
	// killed once more after them.
	batchAt := cfg.Duration * 40 / 100
	h.batchItems = cfg.BatchItems(batchAt)
	// The operator: a runtime of the harness's own, never run, that sets
	// the family's members and pauses and resumes as an operator would.
	opEng, err := postgres.New(postgres.Config{Pool: h.db})
	if err != nil {
		t.Fatal(err)
	}
	operator, err := core.New(reg, core.Options{Engine: opEng, Namespace: pgChaosNamespace, Replica: "operator", LeaseTTL: cfg.TTL, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := operator.Families().SetMany(ctx, pgChaosFamily, pgChaosMembers); err != nil {
		t.Fatalf("setting the family's members: %v", err)
	}
	for i := range cfg.Replicas {
		h.replicas = append(h.replicas, &pgChaosReplica{idx: i, offset: cfg.Offset(i)})
		h.start(h.replicas[i])
	}

	// Warm-up: a leader has written every schedule's and member's first
	// cursor. Slots before that were never meant to run (a new schedule
	// starts from now), and a leader ahead by the skew set that "now" up
	// to skew in the future, so counting starts after it.
	ordinary := 0
	for _, s := range reg.Schedules() {
		if !s.Family() {
			ordinary++
		}
	}
	if !h.waitUntil(60*time.Second, "a leader to initialise every schedule's and member's cursor", func() bool {
		return h.count(`SELECT count(*) FROM belfry_cursor WHERE namespace = $1`, pgChaosNamespace) >= ordinary &&
			h.count(`SELECT count(*) FROM belfry_member WHERE namespace = $1 AND coalesce(cursor, '') <> ''`,
				pgChaosNamespace) >= len(pgChaosMembers)
	}) {
		t.FailNow()
	}
	warm := time.NewTimer(cfg.Skew + 2*time.Second)
	<-warm.C
	start := time.Now()
	windowStart := start.Truncate(time.Second).Add(time.Second)

	ops := h.operate(operator, start)
	batchTriggered := chaoskit.TriggerBatch(t, start.Add(batchAt), h.batchItems, func(ctx context.Context) (string, error) {
		occ, err := operator.Trigger(core.WithActor(ctx, "chaos"), chaoskit.BatchSchedule, "chaos-batch")
		return occ.ID, err
	})
	h.runChaos(start)
	opLog := <-ops
	end := time.Now()
	<-batchTriggered
	h.logf("faults over after %s; the long job's worker is stopped and killed, then draining", end.Sub(start).Round(time.Millisecond))
	batch := chaoskit.StopAndKillBatchWorker(t, h.dir, h.procs(), func(i int) { h.start(h.replicas[i]) })

	slots := map[string][]int64{}
	for _, s := range reg.Schedules() {
		if s.Family() {
			continue
		}
		for slot := s.Next(windowStart.Add(-time.Nanosecond)); !slot.IsZero() && !slot.After(end); slot = s.Next(slot) {
			slots[s.Name] = append(slots[s.Name], slot.Unix())
		}
	}
	// Per member: every second of the window, the deleted member's up to
	// its deletion (less the skew: a leader behind may not have reached it).
	margin := cfg.Skew + 2*time.Second
	deleted := pgChaosMembers[len(pgChaosMembers)-1].Key
	for _, m := range pgChaosMembers {
		last := end
		if m.Key == deleted {
			last = opLog.deletedFirst.Add(-margin)
		}
		name := pgChaosFamily + "/" + m.Key
		for slot := windowStart; !slot.After(last); slot = slot.Add(time.Second) {
			slots[name] = append(slots[name], slot.Unix())
		}
	}
	pausedState := func(name string, slot int64) slotState {
		if name != pgChaosPaused {
			return slotRuns
		}
		at := time.Unix(slot, 0)
		switch {
		case at.Before(opLog.pausedFirst.Add(-margin)) || at.After(opLog.resumed.Add(margin)):
			return slotRuns
		case at.After(opLog.paused.Add(margin)) && at.Before(opLog.resumedFirst.Add(-margin)):
			return slotPaused
		}
		return slotMaybePaused
	}
	h.drain(slots, end, pausedState)
	h.waitUntil(3*time.Minute, "the long job to be done", func() bool {
		rec, err := chaoskit.ReadBatchLogs(h.dir)
		return err == nil && rec.Done
	})
	h.stopAll()

	execs := h.readRecords()
	var occurrences, duplicates, missed, retries, pausedSlots, familyOccurrences int
	for name, list := range slots {
		for _, slot := range list {
			e := execs[name][slot]
			at := time.Unix(slot, 0).UTC().Format(time.TimeOnly)
			jobs := len(e.jobs)
			switch pausedState(name, slot) {
			case slotPaused:
				pausedSlots++
				if e.runs > 0 {
					t.Errorf("chaos: %s slot %s (%d) ran %d times although it came due while paused", name, at, slot, e.runs)
				}
				continue
			case slotMaybePaused: // within skew of the pause or resume: either is right
				if jobs > 1 {
					duplicates += jobs - 1
					t.Errorf("chaos: %s slot %s (%d) was enqueued %d times (jobs %v)", name, at, slot, jobs, e.jobIDs())
				}
				continue
			}
			occurrences++
			if strings.HasPrefix(name, pgChaosFamily+"/") {
				familyOccurrences++
			}
			if jobs == 0 {
				missed++
				if missed <= 20 {
					t.Errorf("chaos: %s slot %s (%d) never ran: %s", name, at, slot, h.why(name, slot))
				}
				continue
			}
			if jobs > 1 {
				duplicates += jobs - 1
				t.Errorf("chaos: %s slot %s (%d) was enqueued %d times (jobs %v)", name, at, slot, jobs, e.jobIDs())
			}
			if e.runs > jobs {
				retries += e.runs - jobs
				t.Logf("chaos: %s slot %s (%d) ran %d times from %d job(s): River delivered a job again", name, at, slot, e.runs, jobs)
			}
		}
	}
	if missed > 20 {
		t.Errorf("chaos: ... and %d more slots never ran", missed-20)
	}
	// The deleted member ran nothing that came due after its deletion.
	afterDelete := 0
	for slot, e := range execs[pgChaosFamily+"/"+deleted] {
		if time.Unix(slot, 0).After(opLog.deleted.Add(margin)) {
			afterDelete += e.runs
			t.Errorf("chaos: %s/%s slot %d ran %d times after the member was deleted", pgChaosFamily, deleted, slot, e.runs)
		}
	}
	// The queue's own view: no occurrence's key was ever inserted twice,
	// in or out of the window.
	twice := h.count(`SELECT count(*) FROM (SELECT 1 FROM river_job WHERE queue = $1
		GROUP BY metadata->>'belfry_key' HAVING count(*) > 1) d`, pgChaosQueue)
	if twice != 0 {
		t.Errorf("chaos: %d occurrence keys have more than one River job", twice)
	}
	if retries > 0 {
		fmt.Printf("chaos: retries=%d (River ran a job again after its worker died mid-run: at-least-once delivery, not a second enqueue)\n", retries)
	}
	skew := strconv.FormatFloat(cfg.Skew.Seconds(), 'f', -1, 64)
	// Today's keys, the Redis-only ones at 0 (a Postgres run restarts no
	// Redis, flushes nothing, fails nothing over and has no lost window),
	// then what this engine adds. stalls counts the lock stalls.
	line := fmt.Sprintf("chaos: occurrences=%d duplicates=%d missed=%d kills=%d pauses=%d skew_s=%s redis_restarts=0 paused_slots=%d flushes=0 lost_window=0 partitions=%d stalls=%d failovers=0",
		occurrences, duplicates, missed, h.kills, h.pauses, skew, pausedSlots, h.partitions, h.lockStalls)
	line += fmt.Sprintf(" family_occurrences=%d family_after_delete=%d queued_at_flush=0", familyOccurrences, afterDelete)
	line += fmt.Sprintf(" engine=postgres replicas=%d duration_s=%d pg_restarts=%d terminations=%d lock_stalls=%d retries=%d",
		cfg.Replicas, int(cfg.Duration.Seconds()), h.restarts, h.terminations, h.lockStalls, retries)
	batch = h.countBatch(batch)
	line += batch.Summary()
	chaoskit.WriteSummary(t, *chaosSummary, line)
	if occurrences == 0 {
		t.Error("chaos: no slot came due in the window")
	}
	if pausedSlots == 0 {
		t.Error("chaos: no slot came due while the operator's pause held")
	}
	for kind, n := range map[string]int{"kill": h.kills, "pause": h.pauses, "partition": h.partitions,
		"terminate": h.terminations, "restart": h.restarts, "lockstall": h.lockStalls} {
		if cfg.Faults[kind] && n == 0 {
			t.Errorf("chaos: fault %s was selected but never injected", kind)
		}
	}
	fmt.Println(line)
}

type slotState int

const (
	slotRuns slotState = iota
	slotPaused
	slotMaybePaused
)

// pgChaosOps is when the operator acted: each from its first attempt (one
// that failed may have landed) to the one that succeeded.
type pgChaosOps struct {
	pausedFirst, paused, resumedFirst, resumed, deletedFirst, deleted time.Time
}

// countBatch counts the long job's processings from its own rows: with
// the checkpoint saved in each batch's transaction, every item exactly
// once.
func (h *pgChaosHarness) countBatch(hits chaoskit.BatchCounts) chaoskit.BatchCounts {
	times := make([]int, h.batchItems)
	rows, err := h.db.Query(context.Background(), `SELECT item, count(*) FROM `+pgBatchTable+` GROUP BY item`)
	if err == nil {
		for rows.Next() {
			var item, n int
			if err = rows.Scan(&item, &n); err != nil {
				break
			}
			if item >= 0 && item < len(times) {
				times[item] = n
			}
		}
		rows.Close()
		err = cmp.Or(err, rows.Err())
	}
	if err != nil {
		h.t.Errorf("chaos: counting the long job's rows: %v", err)
	}
	rec, err := chaoskit.ReadBatchLogs(h.dir)
	if err != nil {
		h.t.Errorf("chaos: reading the long job's logs: %v", err)
	}
	c := chaoskit.CountBatch(h.batchItems, func(i int) int { return times[i] })
	c.Attempts, c.SIGTERMs, c.SIGKILLs = rec.Attempts, hits.SIGTERMs, hits.SIGKILLs
	if c.Missing > 0 {
		h.t.Errorf("chaos: the long job left %d of its %d items unprocessed", c.Missing, c.Items)
	}
	if c.Dups > 0 {
		h.t.Errorf("chaos: the long job processed %d items more than once; want every item exactly once", c.Dups)
	}
	if c.Attempts < 3 {
		h.t.Errorf("chaos: the long job ran in %d attempts; want at least its timeout, the SIGTERM and the SIGKILL to interrupt it", c.Attempts)
	}
	return c
}

// operate pauses pgChaosPaused at 15% of the run and resumes it at 40%,
// and deletes the family's last member at 50%, through the runtime's API
// as an operator would, retrying while the database is down.
func (h *pgChaosHarness) operate(rt *core.Runtime, start time.Time) <-chan pgChaosOps {
	out := make(chan pgChaosOps, 1)
	act := func(at time.Duration, what string, do func(context.Context) error) (first, done time.Time) {
		time.Sleep(time.Until(start.Add(at)))
		first = time.Now()
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			err := do(core.WithActor(ctx, "chaos"))
			cancel()
			if err == nil {
				done = time.Now()
				h.logf("operator: %s (took %s)", what, done.Sub(first).Round(time.Millisecond))
				return first, done
			}
			h.logf("operator: %s failed, retrying: %v", what, err)
			time.Sleep(200 * time.Millisecond)
		}
	}
	go func() {
		var ops pgChaosOps
		d := h.cfg.Duration
		ops.pausedFirst, ops.paused = act(d*15/100, "pause "+pgChaosPaused, func(ctx context.Context) error {
			return rt.Pause(ctx, pgChaosPaused, "chaos: operator pause")
		})
		ops.resumedFirst, ops.resumed = act(d*40/100, "resume "+pgChaosPaused, func(ctx context.Context) error {
			return rt.Resume(ctx, pgChaosPaused)
		})
		deleted := pgChaosMembers[len(pgChaosMembers)-1].Key
		ops.deletedFirst, ops.deleted = act(d*50/100, "delete member "+deleted, func(ctx context.Context) error {
			return rt.Families().Delete(ctx, pgChaosFamily, deleted)
		})
		out <- ops
	}()
	return out
}

// pgChaosEvent is one step of the fault schedule, at an offset from the
// start.
type pgChaosEvent struct {
	at   time.Duration
	kind string
	hold time.Duration
	// mode is a restart's shutdown mode, a lock stall's table.
	mode string
}

// plan draws the whole fault schedule from the seed before anything runs,
// so a seed names one sequence of faults. Which replica a kill, pause or
// partition hits is whichever plans at that moment.
func (h *pgChaosHarness) plan() []*pgChaosEvent {
	cfg := h.cfg
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x62656c667279))
	between := func(lo, hi time.Duration) time.Duration {
		return lo + time.Duration(rng.Int64N(int64(hi-lo)+1))
	}
	var evs []*pgChaosEvent
	for at := between(2*time.Second, 5*time.Second); at < cfg.Duration; at += between(2*time.Second, 6*time.Second) {
		ev := &pgChaosEvent{at: at, kind: "kill", hold: between(500*time.Millisecond, 3*time.Second)}
		if rng.IntN(4) == 0 {
			// Longer than the lease: another replica takes over, and this
			// one wakes up still believing it plans.
			ev.kind, ev.hold = "pause", between(cfg.TTL+time.Second, 2*cfg.TTL+2*time.Second)
		}
		evs = append(evs, ev)
	}
	if !slices.ContainsFunc(evs, func(e *pgChaosEvent) bool { return e.kind == "pause" }) && len(evs) > 1 {
		evs[1].kind, evs[1].hold = "pause", cfg.TTL+2*time.Second
	}
	if !slices.ContainsFunc(evs, func(e *pgChaosEvent) bool { return e.kind == "kill" }) {
		evs[0].kind = "kill"
	}
	// The link and server faults, once per minute of the run, each in its
	// own part of the minute so that each is seen on its own at least
	// once (kills and pauses go on throughout).
	modes := []string{"fast", "immediate"}
	tables := []string{"belfry_slot", "belfry_leader"}
	for minute := time.Duration(0); minute < max(cfg.Duration/time.Minute, 1); minute++ {
		span := min(cfg.Duration, time.Minute)
		at := func(lo, hi int) time.Duration {
			return minute*time.Minute + between(span*time.Duration(lo)/100, span*time.Duration(hi)/100)
		}
		evs = append(evs,
			&pgChaosEvent{at: at(5, 12), kind: "partition", hold: between(3*cfg.TTL, 6*cfg.TTL)},
			&pgChaosEvent{at: at(25, 32), kind: "terminate"},
			&pgChaosEvent{at: at(55, 62), kind: "restart", hold: between(200*time.Millisecond, 1500*time.Millisecond),
				mode: modes[int(minute)%len(modes)]},
			&pgChaosEvent{at: at(75, 82), kind: "lockstall", hold: between(cfg.TTL, 2*cfg.TTL),
				mode: tables[int(minute)%len(tables)]},
		)
	}
	evs = slices.DeleteFunc(evs, func(e *pgChaosEvent) bool { return !cfg.Faults[e.kind] })
	slices.SortStableFunc(evs, func(a, b *pgChaosEvent) int { return cmp.Compare(a.at, b.at) })
	return evs
}

// runChaos plays the fault schedule, then waits for the pending restarts
// and wake-ups so every replica is up for the drain.
func (h *pgChaosHarness) runChaos(start time.Time) {
	queue := h.plan()
	var plan []string
	for _, ev := range queue {
		plan = append(plan, fmt.Sprintf("%s@%s/%s", ev.kind, ev.at.Round(time.Millisecond), ev.hold.Round(time.Millisecond)))
	}
	h.logf("fault plan (kind@offset/hold): %s", strings.Join(plan, " "))
	for _, ev := range queue {
		time.Sleep(time.Until(start.Add(ev.at)))
		switch ev.kind {
		case "kill", "pause", "partition":
			h.hitPlanner(ev)
		case "terminate":
			h.terminate()
		case "restart":
			h.restartServer(ev)
		case "lockstall":
			h.lockStall(ev)
		}
	}
	time.Sleep(time.Until(start.Add(h.cfg.Duration)))
	h.followUp.Wait()
}

// hitPlanner kills, stops or cuts off the replica that holds the lease,
// trying for a few seconds when none does (a takeover under way).
func (h *pgChaosHarness) hitPlanner(ev *pgChaosEvent) {
	var r *pgChaosReplica
	for range 20 {
		if r = h.leader(); r != nil {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if r == nil {
		h.logf("%s skipped: no running replica holds the lease", ev.kind)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	switch ev.kind {
	case "kill":
		h.kills++
		h.logf("SIGKILL planner %s (pid %d); restart in %s", r.Name, r.Cmd.Process.Pid, ev.hold.Round(time.Millisecond))
		r.Cmd.Process.Kill()
		<-r.Exited
		r.State = chaoskit.Dead
		h.later(ev.hold, func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.start(r)
		})
	case "pause":
		h.pauses++
		h.logf("SIGSTOP planner %s (pid %d) for %s, past its lease", r.Name, r.Cmd.Process.Pid, ev.hold.Round(time.Millisecond))
		r.Cmd.Process.Signal(syscall.SIGSTOP)
		r.State = chaoskit.Paused
		h.later(ev.hold, func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			r.Cmd.Process.Signal(syscall.SIGCONT)
			r.State = chaoskit.Running
			h.logf("SIGCONT %s (pid %d)", r.Name, r.Cmd.Process.Pid)
		})
	case "partition":
		h.partitions++
		h.logf("partition: %s's link black-holed for %s", r.Name, ev.hold.Round(time.Millisecond))
		r.proxy.BlackHole()
		h.later(ev.hold, func() {
			r.proxy.Pass()
			h.logf("partition healed: %s's held traffic delivered", r.Name)
		})
	}
}

// later runs f after d, counted in followUp.
func (h *pgChaosHarness) later(d time.Duration, f func()) {
	h.followUp.Add(1)
	time.AfterFunc(d, func() { defer h.followUp.Done(); f() })
}

// terminate ends every connection of belfry's database but the
// harness's own: the replicas' engines and River clients alike.
func (h *pgChaosHarness) terminate() {
	n := h.count(`SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name <> 'belfry-chaos-harness'`)
	if n < 0 {
		h.logf("pg_terminate_backend failed")
		return
	}
	h.terminations++
	h.logf("pg_terminate_backend: %d connections ended", n)
}

// restartServer stops the private PostgreSQL and starts it again after
// ev.hold; every connection is lost, and an immediate stop leaves the
// committed transactions to WAL recovery.
func (h *pgChaosHarness) restartServer(ev *pgChaosEvent) {
	h.restarts++
	h.logf("PostgreSQL stop (-m %s); down for %s", ev.mode, ev.hold.Round(time.Millisecond))
	h.server.Stop(ev.mode)
	wait := time.NewTimer(ev.hold)
	<-wait.C
	h.server.Start()
	h.logf("PostgreSQL started again")
}

// lockStall holds an exclusive lock on one of belfry's tables for ev.hold
// (at least the replicas' statement_timeout), in a transaction of its
// own, while the schedule goes on.
func (h *pgChaosHarness) lockStall(ev *pgChaosEvent) {
	h.followUp.Add(1)
	go func() {
		defer h.followUp.Done()
		ctx, cancel := context.WithTimeout(context.Background(), ev.hold+10*time.Second)
		defer cancel()
		tx, err := h.db.Begin(ctx)
		if err != nil {
			h.logf("lock stall: begin failed: %v", err)
			return
		}
		defer tx.Rollback(context.Background())
		if _, err := tx.Exec(ctx, "LOCK TABLE "+ev.mode+" IN ACCESS EXCLUSIVE MODE"); err != nil {
			h.logf("lock stall: LOCK TABLE %s failed: %v", ev.mode, err)
			return
		}
		h.mu.Lock()
		h.lockStalls++
		h.mu.Unlock()
		h.logf("lock stall: %s locked for %s", ev.mode, ev.hold.Round(time.Millisecond))
		hold := time.NewTimer(ev.hold)
		<-hold.C
		if err := tx.Commit(ctx); err != nil {
			h.logf("lock stall: commit failed: %v", err)
		}
		h.logf("lock stall over: %s unlocked", ev.mode)
	}()
}

// leader is the running replica the lease row names, nil if none.
func (h *pgChaosHarness) leader() *pgChaosReplica {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var holder string
	err := h.db.QueryRow(ctx, `SELECT holder FROM belfry_leader WHERE namespace = $1 AND expires_at > clock_timestamp()`,
		pgChaosNamespace).Scan(&holder)
	if err != nil {
		return nil
	}
	name, _, _ := strings.Cut(holder, "|")
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.replicas {
		if r.Name == name && r.State == chaoskit.Running {
			return r
		}
	}
	return nil
}

// start launches a new incarnation of replica r.
func (h *pgChaosHarness) start(r *pgChaosReplica) {
	h.t.Helper()
	r.incarnation++
	r.Name = fmt.Sprintf("r%d.%d", r.idx, r.incarnation)
	if r.proxy == nil {
		r.proxy = netfault.New(h.t, "tcp", "127.0.0.1:"+strconv.Itoa(h.server.Port))
	}
	logf, err := os.Create(filepath.Join(h.dir, "replica-"+r.Name+".log"))
	if err != nil {
		h.t.Fatal(err)
	}
	defer logf.Close() // the child keeps its own descriptor
	cmd := exec.Command(h.exe, "-test.run=^TestChaosPostgresReplica$", "-test.count=1", "-test.timeout=0", "-test.v")
	cmd.Env = append(os.Environ(),
		envChaosReplica+"="+r.Name,
		envChaosURL+"="+h.server.URL(r.proxy.Addr(), pgChaosDatabase),
		envChaosOffset+"="+r.offset.String(),
		envChaosRecord+"="+filepath.Join(h.dir, "exec-"+r.Name+".log"),
		envChaosTTL+"="+h.cfg.TTL.String(),
		envChaosGrace+"="+h.cfg.Grace.String(),
		envChaosBatchItems+"="+strconv.Itoa(h.batchItems),
		// The bound on skew the replicas are told: the harness's own and
		// a second.
		envChaosSkew+"="+(h.cfg.Skew+time.Second).String(),
	)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := r.Start(cmd); err != nil {
		h.t.Fatalf("starting replica %s: %v", r.Name, err)
	}
	h.logf("started replica %s (pid %d, clock offset %s)", r.Name, cmd.Process.Pid, r.offset)
}

// count runs a query of one integer on the harness's pool; -1 on error.
func (h *pgChaosHarness) count(sql string, args ...any) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var n int
	if err := h.db.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		return -1
	}
	return n
}

// drain keeps the replicas running until every slot of the window that
// must run has run and no job the window enqueued is still waiting,
// running or due for a retry (a job orphaned by a SIGKILLed worker is
// rescued by River, and may run the handler again: that must be seen).
func (h *pgChaosHarness) drain(slots map[string][]int64, end time.Time, state func(string, int64) slotState) {
	// A replica behind by the skew enqueues the last slots that much
	// later, and a planner killed at the very end is replaced within a TTL.
	settle := time.NewTimer(h.cfg.Skew + h.cfg.TTL + 2*time.Second)
	<-settle.C
	cutoff := time.Now()
	var last string
	h.waitUntil(3*time.Minute+h.cfg.Grace, "the window's jobs to finish", func() bool {
		execs := h.readRecords()
		for name, list := range slots {
			for _, slot := range list {
				if len(execs[name][slot].jobs) == 0 && state(name, slot) == slotRuns {
					last = fmt.Sprintf("%s slot %d has not run", name, slot)
					return false
				}
			}
		}
		n := h.count(`SELECT count(*) FROM river_job WHERE queue = $1 AND created_at < $2
			AND state IN ('available', 'pending', 'running', 'retryable', 'scheduled')`, pgChaosQueue, cutoff)
		if n != 0 {
			last = fmt.Sprintf("%d jobs of the window are not finished", n)
			return false
		}
		return true
	}, func() string { return last })
}

// why says what the database knows of a slot that never ran.
func (h *pgChaosHarness) why(name string, slot int64) string {
	sched, member, _ := strings.Cut(name, "/")
	rows := h.count(`SELECT count(*) FROM belfry_slot WHERE namespace = $1 AND schedule = $2 AND member = $3
		AND slot = to_timestamp($4)`, pgChaosNamespace, sched, member, slot)
	return fmt.Sprintf("slot rows %d (0: never claimed; 1: claimed, its job never ran)", rows)
}

// pgChaosExecs are one slot's executions.
type pgChaosExecs struct {
	runs int
	jobs map[int64]int
}

func (e pgChaosExecs) jobIDs() []int64 {
	var ids []int64
	for id := range e.jobs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// readRecords reads every execution record, per name and slot.
func (h *pgChaosHarness) readRecords() map[string]map[int64]pgChaosExecs {
	out := map[string]map[int64]pgChaosExecs{}
	files, _ := filepath.Glob(filepath.Join(h.dir, "exec-*.log"))
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			h.t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) != 7 {
				continue // a line cut short by a SIGKILL mid-write
			}
			slot, err1 := strconv.ParseInt(fields[1], 10, 64)
			job, err2 := strconv.ParseInt(fields[3], 10, 64)
			if err1 != nil || err2 != nil {
				continue
			}
			if out[fields[0]] == nil {
				out[fields[0]] = map[int64]pgChaosExecs{}
			}
			e := out[fields[0]][slot]
			if e.jobs == nil {
				e.jobs = map[int64]int{}
			}
			e.runs++
			e.jobs[job]++
			out[fields[0]][slot] = e
		}
		f.Close()
	}
	return out
}

// stopAll stops every replica the way a deploy does (chaoskit.StopAll).
func (h *pgChaosHarness) stopAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	chaoskit.StopAll(h.t, h.procs())
}

// killAll is the failure-path cleanup (chaoskit.KillAll).
func (h *pgChaosHarness) killAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	chaoskit.KillAll(h.procs())
}

// procs are the replicas' current processes.
func (h *pgChaosHarness) procs() []*chaoskit.Proc {
	out := make([]*chaoskit.Proc, len(h.replicas))
	for i, r := range h.replicas {
		out[i] = &r.Proc
	}
	return out
}

func (h *pgChaosHarness) waitUntil(within time.Duration, what string, cond func() bool, why ...func() string) bool {
	h.t.Helper()
	return chaoskit.WaitUntil(h.t, within, what, cond, why...)
}
