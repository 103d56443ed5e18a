package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/core"
	"github.com/belfry/belfry/runtime/postgres"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/robfig/cron/v3"
)

// The postgres step runs belfry on the Postgres engine and River's own
// periodic jobs side by side, in one database of the machine's PostgreSQL
// (BENCH_POSTGRES, default postgres://postgres@127.0.0.1:5432/postgres;
// the database is created for the run and dropped after): three belfry
// processes and three River clients, each side with a per-second
// schedule. Both sides' enqueues are read from the same table, river_job:
// a job's created_at is when its inserting transaction began, and its slot
// is belfry's occurrence slot or River's scheduled_at (the periodic
// enqueuer schedules each job at its cron time). Then the leader of each
// side is SIGKILLed at the same moment, and each slot after is counted:
// missing, or inserted more than once. Last, 10,000 schedules and a
// 20,000-member family due at one second, on the belfry side alone.

const (
	pgBenchNamespace   = "bench-pg"
	pgBenchBelfryQueue = "bench-pg-belfry"
	pgBenchRiverQueue  = "bench-pg-river"
	// pgBenchTTL is belfry's lease TTL in the kill rounds; River's
	// leadership TTL is its own, fixed.
	pgBenchTTL = 2 * time.Second
)

type pgResult struct {
	ran, kills                 bool
	fireSlots                  int
	fireP50, fireP99           time.Duration
	riverP50, riverP99         time.Duration
	fireTop, riverTop          []time.Duration
	rounds                     int
	missedBelfry, missedRiver  int
	dupBelfry, dupRiver        int
	takeovers, riverTakeovers  []time.Duration
	spikeN, familyN            int
	spike, familySpike         time.Duration
	familySpikes               []time.Duration // every trial's, in order
	spikeJobs, familySpikeJobs int
	// familyCPU is where the family spike's time went: the CPU of this
	// process (the runtime) and of the database's backends serving it.
	familyCPU pgCPU
}

func pgAdminURL() string {
	if u := os.Getenv("BENCH_POSTGRES"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/postgres"
}

// benchPostgres runs the postgres step in a database of its own.
func benchPostgres(s settings, r *results) error {
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, pgAdminURL())
	if err != nil {
		return fmt.Errorf("postgres at %s: %w (set BENCH_POSTGRES)", pgAdminURL(), err)
	}
	defer admin.Close(ctx)
	b := make([]byte, 6)
	rand.Read(b)
	name := "belfry_bench_" + hex.EncodeToString(b)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return err
	}
	defer func() {
		if _, err := admin.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
			fmt.Fprintf(os.Stderr, "bench: dropping %s: %v\n", name, err)
		}
	}()
	cfg, err := pgxpool.ParseConfig(pgAdminURL())
	if err != nil {
		return err
	}
	cfg.ConnConfig.Database = name
	cfg.MaxConns = 32
	db, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := postgres.Migrate(ctx, db, postgres.MigrateOptions{River: true}); err != nil {
		return err
	}
	url := fmt.Sprintf("postgres://%s@%s/%s", cfg.ConnConfig.User,
		net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))), name)
	r.pg.ran = true
	parts, err := pgParts()
	if err != nil {
		return err
	}
	if parts["side"] {
		if err := pgSideBySide(ctx, db, url, s, &r.pg); err != nil {
			return err
		}
	}
	if parts["spike"] {
		if err := pgSpike(ctx, db, s.pgSpike, &r.pg); err != nil {
			return fmt.Errorf("spike: %w", err)
		}
	}
	if parts["family"] {
		return pgFamilySpike(ctx, db, s.pgFamilySpike, s.pgFamilyTrials, &r.pg)
	}
	return nil
}

// pgPartNames are the parts of the postgres step BENCH_PG_PARTS names:
// the side-by-side run (fire lag and kills), the 10k spike, the family
// spike.
var pgPartNames = []string{"side", "spike", "family"}

// pgParts is the set of parts BENCH_PG_PARTS (comma-separated) asks for,
// every part when it is unset. A run of some parts prints the others'
// keys as zero.
func pgParts() (map[string]bool, error) {
	parts := map[string]bool{}
	v := os.Getenv("BENCH_PG_PARTS")
	if v == "" {
		v = strings.Join(pgPartNames, ",")
	}
	for _, p := range strings.Split(v, ",") {
		if !slices.Contains(pgPartNames, p) {
			return nil, fmt.Errorf("BENCH_PG_PARTS: unknown part %q; want some of %s", p, strings.Join(pgPartNames, ","))
		}
		parts[p] = true
	}
	return parts, nil
}

// pgProc is one replica process of the side-by-side run.
type pgProc struct {
	mode, name string
	cmd        *exec.Cmd
	exited     chan struct{}
}

func startPGProc(mode, name, url string) (*pgProc, error) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), replicaEnv+"="+mode, "BENCH_PG_URL="+url, "BENCH_NAME="+name, "BENCH_TTL="+pgBenchTTL.String())
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &pgProc{mode: mode, name: name, cmd: cmd, exited: make(chan struct{})}
	go func() { cmd.Wait(); close(p.exited) }()
	return p, nil
}

func (p *pgProc) stop() {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(15 * time.Second):
		p.cmd.Process.Kill()
		<-p.exited
	}
}

// pgReplicaMain is a replica process: "pg-belfry" runs a runtime on the
// Postgres engine with a per-second schedule; "pg-river" a River client
// with a per-second periodic job (a robfig cron schedule, as River's docs
// show). Neither needs its jobs worked: what is measured is the inserts.
func pgReplicaMain(mode string) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, mode+":", err)
		os.Exit(2)
	}
	pool, err := pgxpool.New(ctx, os.Getenv("BENCH_PG_URL"))
	if err != nil {
		fail(err)
	}
	defer pool.Close()
	name := os.Getenv("BENCH_NAME")
	ttl, _ := time.ParseDuration(os.Getenv("BENCH_TTL"))
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	switch mode {
	case "pg-belfry":
		reg := registry.MustNew(registry.Schedule{Name: "tick", Expr: "* * * * * *", Queue: pgBenchBelfryQueue,
			Handler: func(context.Context, registry.Occurrence) error { return nil }})
		eng, err := postgres.New(postgres.Config{Pool: pool})
		if err != nil {
			fail(err)
		}
		rt, err := core.New(reg, core.Options{Engine: eng, Namespace: pgBenchNamespace, Replica: name, LeaseTTL: ttl, Logger: log})
		if err != nil {
			fail(err)
		}
		rt.Run(ctx)
		rt.Close()
	case "pg-river":
		every, err := cron.NewParser(cron.Second | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow).Parse("* * * * * *")
		if err != nil {
			fail(err)
		}
		workers := river.NewWorkers()
		river.AddWorker(workers, river.WorkFunc(func(context.Context, *river.Job[riverTick]) error { return nil }))
		client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
			ID:     name,
			Queues: map[string]river.QueueConfig{pgBenchRiverQueue: {MaxWorkers: 2}},
			// River's own log stays quiet: its stop reports the periodic
			// insert it was making as an error, and the run judges River
			// from river_job, not from its log.
			Workers: workers, Logger: slog.New(slog.DiscardHandler),
			PeriodicJobs: []*river.PeriodicJob{river.NewPeriodicJob(every, func() (river.JobArgs, *river.InsertOpts) {
				return riverTick{}, &river.InsertOpts{Queue: pgBenchRiverQueue}
			}, nil)},
		})
		if err != nil {
			fail(err)
		}
		if err := client.Start(ctx); err != nil {
			fail(err)
		}
		<-ctx.Done()
		stopCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		client.Stop(stopCtx)
	}
}

// riverTick is the River side's periodic job.
type riverTick struct{}

func (riverTick) Kind() string { return "river_tick" }

// pgSideBySide starts both sides' three processes, measures their fire
// lag in steady state, then kills both leaders at once, round after round.
func pgSideBySide(ctx context.Context, db *pgxpool.Pool, url string, s settings, res *pgResult) error {
	procs := map[string]*pgProc{}
	start := func(mode, name string) error {
		p, err := startPGProc(mode, name, url)
		procs[name] = p
		return err
	}
	defer func() {
		for _, p := range procs {
			p.stop()
		}
	}()
	for i := range 3 {
		if err := start("pg-belfry", "belfry-"+strconv.Itoa(i)); err != nil {
			return err
		}
		if err := start("pg-river", "river-"+strconv.Itoa(i)); err != nil {
			return err
		}
	}
	// Both sides inserting: River's first leader is elected within its
	// fixed election interval, not at once.
	steady, err := pgWait(ctx, db, 60*time.Second, `SELECT count(*) FILTER (WHERE queue = $1) > 0 AND count(*) FILTER (WHERE queue = $2) > 0
		FROM river_job WHERE created_at > now() - interval '2 seconds'`, pgBenchBelfryQueue, pgBenchRiverQueue)
	if err != nil {
		return fmt.Errorf("waiting for both sides to insert: %w", err)
	}
	steady = steady.Add(2 * time.Second).Truncate(time.Second)
	time.Sleep(time.Until(steady.Add(time.Duration(s.pgFireSlots+1) * time.Second)))
	res.fireSlots = s.pgFireSlots
	to := steady.Add(time.Duration(s.pgFireSlots) * time.Second)
	ours, err := pgLags(ctx, db, pgBenchBelfryQueue, steady, to)
	if err != nil {
		return err
	}
	theirs, err := pgLags(ctx, db, pgBenchRiverQueue, steady, to)
	if err != nil {
		return err
	}
	if len(ours) == 0 || len(theirs) == 0 {
		return fmt.Errorf("fire lag: %d belfry and %d River slots in the window", len(ours), len(theirs))
	}
	res.fireP50, res.fireP99, res.fireTop = percentile(ours, 50), percentile(ours, 99), slowest(ours, 3)
	res.riverP50, res.riverP99, res.riverTop = percentile(theirs, 50), percentile(theirs, 99), slowest(theirs, 3)

	if s.pgKills == 0 {
		return nil
	}
	res.kills, res.rounds = true, s.pgKills
	from := time.Now().Truncate(time.Second).Add(time.Second)
	for range s.pgKills {
		var belfryLeader, riverLeader string
		if err := db.QueryRow(ctx, `SELECT split_part(holder, '|', 1) FROM belfry_leader WHERE namespace = $1 AND expires_at > clock_timestamp()`,
			pgBenchNamespace).Scan(&belfryLeader); err != nil {
			return fmt.Errorf("belfry's leader: %w", err)
		}
		if err := db.QueryRow(ctx, `SELECT leader_id FROM river_leader`).Scan(&riverLeader); err != nil {
			return fmt.Errorf("River's leader: %w", err)
		}
		killed := time.Now()
		for _, name := range []string{belfryLeader, riverLeader} {
			p := procs[name]
			if p == nil {
				return fmt.Errorf("leader %q is no process of the run", name)
			}
			p.cmd.Process.Kill()
			<-p.exited
		}
		// Restarted soon, as a supervisor would; the takeover is the
		// survivors' to make, within each side's own TTL.
		time.Sleep(time.Second)
		if err := start("pg-belfry", belfryLeader); err != nil {
			return err
		}
		if err := start("pg-river", riverLeader); err != nil {
			return err
		}
		for _, side := range []struct {
			queue string
			into  *[]time.Duration
		}{{pgBenchBelfryQueue, &res.takeovers}, {pgBenchRiverQueue, &res.riverTakeovers}} {
			first, err := pgWait(ctx, db, s.pgRound, `SELECT count(*) > 0 FROM river_job WHERE queue = $1 AND created_at > $2`, side.queue, killed.Add(500*time.Millisecond))
			if err != nil {
				return fmt.Errorf("no insert on %s within %s of the kill", side.queue, s.pgRound)
			}
			*side.into = append(*side.into, first.Sub(killed))
		}
		time.Sleep(time.Until(killed.Add(s.pgRound)))
	}
	to = time.Now().Add(-3 * time.Second).Truncate(time.Second)
	var err2 error
	if res.missedBelfry, res.dupBelfry, err2 = pgMissed(ctx, db, pgBenchBelfryQueue, from, to); err2 != nil {
		return err2
	}
	res.missedRiver, res.dupRiver, err2 = pgMissed(ctx, db, pgBenchRiverQueue, from, to)
	return err2
}

// pgSlotSQL is a job's slot: belfry's occurrence slot (args' "slot"), or
// River's scheduled_at.
const pgSlotSQL = `CASE WHEN queue = $1 THEN date_trunc('second', scheduled_at) ELSE (args->>'slot')::timestamptz END`

// pgLags are each slot's lag, from its slot to its job's created_at, of
// the slots of queue in [from, to).
func pgLags(ctx context.Context, db *pgxpool.Pool, queue string, from, to time.Time) ([]time.Duration, error) {
	rows, err := db.Query(ctx, `SELECT extract(epoch FROM created_at - slot)::float8 FROM
		(SELECT created_at, `+pgSlotSQL+` AS slot FROM river_job WHERE queue = $2) j
		WHERE slot >= $3 AND slot < $4`, pgBenchRiverQueue, queue, from, to)
	if err != nil {
		return nil, err
	}
	secs, err := pgx.CollectRows(rows, pgx.RowTo[float64])
	var out []time.Duration
	for _, s := range secs {
		out = append(out, time.Duration(s*float64(time.Second)))
	}
	return out, err
}

// pgMissed counts the per-second slots in [from, to) that have no job on
// queue, and the jobs beyond one per slot.
func pgMissed(ctx context.Context, db *pgxpool.Pool, queue string, from, to time.Time) (missed, dup int, err error) {
	err = db.QueryRow(ctx, `WITH s AS (SELECT generate_series($3::timestamptz, $4::timestamptz - interval '1 second', interval '1 second') AS slot),
		j AS (SELECT `+pgSlotSQL+` AS slot, count(*) AS n FROM river_job WHERE queue = $2 GROUP BY 1)
		SELECT count(*) FILTER (WHERE j.n IS NULL), coalesce(sum(j.n - 1) FILTER (WHERE j.n > 1), 0)
		FROM s LEFT JOIN j USING (slot)`, pgBenchRiverQueue, queue, from, to).Scan(&missed, &dup)
	return missed, dup, err
}

// pgWait polls a boolean query until it is true, and returns when it
// first was.
func pgWait(ctx context.Context, db *pgxpool.Pool, within time.Duration, sql string, args ...any) (time.Time, error) {
	deadline := time.Now().Add(within)
	for {
		var ok bool
		if err := db.QueryRow(ctx, sql, args...).Scan(&ok); err != nil {
			return time.Time{}, err
		}
		if ok {
			return time.Now(), nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, errors.New("timed out")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pgSpike has n schedules come due at one second, planned by one runtime
// on the engine, and times the last slot row's commit, as seen by a
// poller, from the slot.
func pgSpike(ctx context.Context, db *pgxpool.Pool, n int, res *pgResult) error {
	slot := time.Now().Add(8 * time.Second).Truncate(time.Second).UTC()
	expr := fmt.Sprintf("%d %d %d * * *", slot.Second(), slot.Minute(), slot.Hour())
	scheds := make([]registry.Schedule, n)
	for i := range scheds {
		scheds[i] = registry.Schedule{Name: fmt.Sprintf("spike-%05d", i), Expr: expr, Queue: "bench-pg-spike",
			Handler: func(context.Context, registry.Occurrence) error { return nil }}
	}
	reg, err := registry.New(scheds...)
	if err != nil {
		return err
	}
	_, stop, err := pgRun(ctx, db, reg, "bench-pg-spike")
	if err != nil {
		return err
	}
	defer stop()
	res.spikeN = n
	if res.spike, err = pgSlotRows(ctx, db, "bench-pg-spike", slot, n); err != nil {
		return err
	}
	res.spikeJobs = pgCount(ctx, db, `SELECT count(*) FROM river_job WHERE queue = 'bench-pg-spike'`)
	return nil
}

// pgFamilyPeriod is how often the family spike's members are due: the
// slots timed are the first ones after the leader has loaded every member.
const pgFamilyPeriod = 10 * time.Second

// pgFamilySpike has n members of a family come due at one second, once
// the leader has them all in hand, as in steady state, and times that
// many of the family's slots one after another: the figure is their
// median, with the CPU of that trial.
func pgFamilySpike(ctx context.Context, db *pgxpool.Pool, n, trials int, res *pgResult) error {
	const ns = "bench-pg-family"
	reg := registry.MustNew(registry.Schedule{Name: "report", Expr: "0 9 * * MON", Zone: "UTC", Per: "tenant", Queue: ns,
		Handler: func(context.Context, registry.Occurrence) error { return nil }})
	members := make([]core.Member, n)
	for i := range members {
		members[i] = core.Member{Key: fmt.Sprintf("tenant-%06d", i), Zone: "UTC", Expr: fmt.Sprintf("*/%d * * * * *", int(pgFamilyPeriod.Seconds()))}
	}
	rt, stop, err := pgRun(ctx, db, reg, ns)
	if err != nil {
		return err
	}
	defer stop()
	if err := rt.Families().SetMany(ctx, "report", members); err != nil {
		return err
	}
	if _, err := pgWait(ctx, db, 2*time.Minute, `SELECT count(*) >= $2 FROM belfry_member WHERE namespace = $1 AND coalesce(cursor, '') <> ''`, ns, n); err != nil {
		return fmt.Errorf("the leader loading %d members: %w", n, err)
	}
	res.familyN = n
	first := time.Now().Add(time.Second).Truncate(pgFamilyPeriod).Add(pgFamilyPeriod).UTC()
	type trial struct {
		took time.Duration
		cpu  pgCPU
		jobs int
	}
	var done []trial
	for k := range trials {
		slot := first.Add(time.Duration(k) * pgFamilyPeriod)
		time.Sleep(time.Until(slot.Add(-100 * time.Millisecond)))
		before := measurePGCPU(ctx, db)
		took, err := pgSlotRows(ctx, db, ns, slot, n)
		if err != nil {
			return err
		}
		t := trial{took: took, cpu: measurePGCPU(ctx, db).since(before)}
		t.jobs = pgCount(ctx, db, `SELECT count(*) FROM river_job WHERE queue = $1 AND (args->>'slot')::timestamptz = $2`, ns, slot)
		done = append(done, t)
		res.familySpikes = append(res.familySpikes, took)
	}
	slices.SortFunc(done, func(a, b trial) int { return cmp.Compare(a.took, b.took) })
	median := done[len(done)/2]
	res.familySpike, res.familyCPU, res.familySpikeJobs = median.took, median.cpu, median.jobs
	return nil
}

// pgRun runs one runtime of reg in namespace ns until stop.
func pgRun(ctx context.Context, db *pgxpool.Pool, reg *registry.Registry, ns string) (*core.Runtime, func(), error) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	eng, err := postgres.New(postgres.Config{Pool: db})
	if err != nil {
		return nil, nil, err
	}
	rt, err := core.New(reg, core.Options{Engine: eng, Namespace: ns, Replica: "solo", LeaseTTL: 5 * time.Second, Logger: log})
	if err != nil {
		return nil, nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { rt.Run(runCtx); close(done) }()
	return rt, func() { cancel(); <-done; rt.Close() }, nil
}

// pgSlotRows waits for n slot rows of slot in namespace ns and returns
// how long after the slot a poller saw them all committed.
func pgSlotRows(ctx context.Context, db *pgxpool.Pool, ns string, slot time.Time, n int) (time.Duration, error) {
	seen, err := pgWait(ctx, db, time.Until(slot)+60*time.Second,
		`SELECT count(*) >= $3 FROM belfry_slot WHERE namespace = $1 AND slot = $2`, ns, slot, n)
	if err != nil {
		return 0, fmt.Errorf("%d slot rows of %s: %w", n, slot.Format(time.TimeOnly), err)
	}
	return seen.Sub(slot), nil
}

// pgCPU is CPU time of this process and of the database's backends
// (those of this run's database, read from /proc: known only when
// PostgreSQL runs on this machine).
type pgCPU struct {
	process, backends time.Duration
	known             bool
	perPID            map[int]time.Duration
}

// measurePGCPU reads this process's CPU and that of each backend now
// connected to db's database.
func measurePGCPU(ctx context.Context, db *pgxpool.Pool) pgCPU {
	c := pgCPU{process: processCPU(), perPID: map[int]time.Duration{}}
	rows, err := db.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database()`)
	if err != nil {
		return c
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return c
	}
	c.known = len(pids) > 0
	for _, pid := range pids {
		used, ok := procCPU(int(pid))
		c.known = c.known && ok
		c.perPID[int(pid)] = used
	}
	return c
}

// since is the CPU used from before to c: the process's, and the
// backends' that were connected at both times.
func (c pgCPU) since(before pgCPU) pgCPU {
	d := pgCPU{process: c.process - before.process, known: c.known && before.known}
	for pid, now := range c.perPID {
		if was, ok := before.perPID[pid]; ok {
			d.backends += now - was
		}
	}
	return d
}

// procCPU is a process's user and system time from /proc.
func procCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndex(s, ")")+2:])
	if len(f) < 13 {
		return 0, false
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100, true
}

func pgCount(ctx context.Context, db *pgxpool.Pool, sql string, args ...any) int {
	var n int
	db.QueryRow(ctx, sql, args...).Scan(&n)
	return n
}

// print writes the step's table rows.
func (p *pgResult) print(w io.Writer) {
	if !p.ran {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "Postgres + River\tbelfry\tRiver periodic jobs\ttarget")
	fmt.Fprintf(tw, "fire lag of a per-second schedule, %d slots, 3 processes each (p50 / p99; slowest)\t%s / %s; %s\t%s / %s; %s\tbelfry p99 <= River p99 + 5 ms\n",
		p.fireSlots, ms(p.fireP50), ms(p.fireP99), durationsMs(p.fireTop), ms(p.riverP50), ms(p.riverP99), durationsMs(p.riverTop))
	if p.kills {
		fmt.Fprintf(tw, "SIGKILL of the leader x%d: first insert after each kill\t%s\t%s\tbelfry <= 1.05 x its lease TTL (%s)\n",
			p.rounds, durations(p.takeovers), durations(p.riverTakeovers), pgBenchTTL)
		fmt.Fprintf(tw, "SIGKILL of the leader x%d: per-second slots missed / inserted twice\t%d / %d\t%d / %d\tbelfry 0 / 0\n",
			p.rounds, p.missedBelfry, p.dupBelfry, p.missedRiver, p.dupRiver)
	}
	fmt.Fprintf(tw, "%d schedules due at one second: last slot row committed after the slot (%d jobs)\t%.3f s\t\t<= 1 s\n", p.spikeN, p.spikeJobs, p.spike.Seconds())
	cpu := "CPU of the database's backends not known"
	if p.familyCPU.known {
		cpu = fmt.Sprintf("CPU: database backends %.2f s (the poller's with them), runtime process %.2f s", p.familyCPU.backends.Seconds(), p.familyCPU.process.Seconds())
	}
	fmt.Fprintf(tw, "%d family members due at one second: last slot row committed after the slot, median of %s (%d jobs; %s)\t%.3f s\t\t<= 1 s\n",
		p.familyN, durations(p.familySpikes), p.familySpikeJobs, cpu, p.familySpike.Seconds())
	tw.Flush()
}

// summary is the step's keys of the bench line; the kill keys only when
// kills were measured (the quick run makes none: River's takeover alone
// takes its fixed leadership TTL).
func (p *pgResult) summary() string {
	if !p.ran {
		return ""
	}
	out := fmt.Sprintf(" pg_fire_p99_ms=%.1f river_periodic_fire_p99_ms=%.1f", msf(p.fireP99), msf(p.riverP99))
	if p.kills {
		out += fmt.Sprintf(" pg_dup_belfry=%d pg_dup_river=%d", p.dupBelfry, p.dupRiver)
	}
	out += fmt.Sprintf(" pg_spike10k_s=%.2f pg_family_spike20k_s=%.2f", p.spike.Seconds(), p.familySpike.Seconds())
	if p.kills {
		out += fmt.Sprintf(" pg_missed_per_kill=%.1f river_missed_per_kill=%.1f",
			float64(p.missedBelfry)/float64(p.rounds), float64(p.missedRiver)/float64(p.rounds))
	}
	return out
}
