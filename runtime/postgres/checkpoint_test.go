package postgres_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/checkpoint"
	"github.com/belfry/belfry/runtime/core"
	"github.com/belfry/belfry/runtime/engine"
	"github.com/belfry/belfry/runtime/postgres"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
)

// rowsJob is a checkpointed handler over a real table: each batch marks
// its rows processed and saves its cursor in the same transaction.
type rowsJob struct {
	db           *pgxpool.Pool
	n, batch     int
	pause        time.Duration // per batch, inside its transaction
	beforeCommit func(ctx context.Context, from int) error
}

func newRowsJob(t *testing.T, db *pgxpool.Pool, n, batch int, pause time.Duration) *rowsJob {
	t.Helper()
	ctx := context.Background()
	if _, err := db.Exec(ctx, `CREATE TABLE work_item (id int PRIMARY KEY, processed int NOT NULL DEFAULT 0)`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, `INSERT INTO work_item (id) SELECT generate_series(1, $1)`, n); err != nil {
		t.Fatal(err)
	}
	return &rowsJob{db: db, n: n, batch: batch, pause: pause}
}

func (j *rowsJob) handler(ctx context.Context, _ registry.Occurrence) error {
	return checkpoint.Run(ctx, func(ctx context.Context, cursor string) (string, bool, error) {
		from, _ := strconv.Atoi(cursor)
		to := min(from+j.batch, j.n)
		err := pgx.BeginFunc(ctx, j.db, func(tx pgx.Tx) error {
			tag, err := tx.Exec(ctx, `UPDATE work_item SET processed = processed + 1 WHERE id > $1 AND id <= $2`, from, to)
			if err != nil {
				return err
			}
			select {
			case <-time.After(j.pause):
			case <-ctx.Done():
				return ctx.Err()
			}
			if j.beforeCommit != nil {
				if err := j.beforeCommit(ctx, from); err != nil {
					return err
				}
			}
			checkpoint.Add(ctx, tag.RowsAffected())
			checkpoint.SetTotal(ctx, int64(j.n))
			return postgres.SaveCheckpoint(ctx, tx, strconv.Itoa(to), to == j.n)
		})
		return strconv.Itoa(to), to == j.n, err
	})
}

// processed counts the rows processed never, once and more than once.
func (j *rowsJob) processed(t *testing.T) (never, once, more int) {
	t.Helper()
	err := j.db.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE processed = 0), count(*) FILTER (WHERE processed = 1),
		count(*) FILTER (WHERE processed > 1) FROM work_item`).Scan(&never, &once, &more)
	if err != nil {
		t.Fatal(err)
	}
	return never, once, more
}

// longRuntime is a runtime on b whose schedule "long" runs h.
func longRuntime(t *testing.T, b *pgBackend, s registry.Schedule) *core.Runtime {
	t.Helper()
	s.Name, s.Expr = "long", "17 3 * * *"
	reg, err := registry.New(s)
	if err != nil {
		t.Fatal(err)
	}
	opts, _ := b.Replica(t)
	opts.Logger = quietLogger()
	rt, err := core.New(reg, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

// riverWorkers starts a River client running rt's schedules; stop stops
// it, cancelling the jobs it runs.
func riverWorkers(t *testing.T, b *pgBackend, rt *core.Runtime) (stop func()) {
	t.Helper()
	workers := river.NewWorkers()
	if err := postgres.AddWorkers(workers, rt); err != nil {
		t.Fatal(err)
	}
	client, err := river.NewClient(riverpgxv5.New(b.direct), &river.Config{
		Queues: map[string]river.QueueConfig{registry.QueueDefault: {MaxWorkers: 2}}, Workers: workers, Logger: quietLogger(),
		FetchCooldown: 10 * time.Millisecond, FetchPollInterval: 50 * time.Millisecond, RetryPolicy: promptRetry{},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	stop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := client.StopAndCancel(ctx); err != nil {
			t.Errorf("stopping River: %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

func record(t *testing.T, rt *core.Runtime, id string) core.Record {
	t.Helper()
	hist, err := rt.History(context.Background(), "long", 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range hist {
		if r.ID == id {
			return r
		}
	}
	return core.Record{}
}

func waitRecorded(t *testing.T, rt *core.Runtime, id string, want core.Outcome, within time.Duration) core.Record {
	t.Helper()
	var r core.Record
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if r = record(t, rt, id); r.Outcome == want {
			return r
		}
	}
	t.Fatalf("occurrence %s recorded %q (%s), want %q", id, r.Outcome, r.Error, want)
	return r
}

// A run longer than its timeout continues in snoozes of its River job
// (no attempt counted, although retry=0 leaves none) and processes every
// row exactly once, each batch saved in its own transaction.
func TestCheckpointedRunLongerThanItsTimeoutContinuesOnRiver(t *testing.T) {
	t.Parallel()
	b := pgHarness{}.NewBackend(t).(*pgBackend)
	job := newRowsJob(t, b.direct, 1500, 30, 60*time.Millisecond)
	rt := longRuntime(t, b, registry.Schedule{Timeout: time.Second, MaxRetry: 0, Handler: job.handler})
	riverWorkers(t, b, rt)
	occ, err := rt.Trigger(context.Background(), "long", "")
	if err != nil {
		t.Fatal(err)
	}
	rec := waitRecorded(t, rt, occ.ID, core.OutcomeSucceeded, 30*time.Second)
	if never, once, more := job.processed(t); once != job.n {
		t.Errorf("rows processed never %d, once %d, more %d; want all %d once", never, once, more, job.n)
	}
	if p := rec.Progress; p == nil || p.Resumptions < 2 || p.Items != int64(job.n) || !p.Done {
		t.Errorf("progress %+v; want done, %d items, at least 2 resumptions", p, job.n)
	}
	if rec.Attempt != 0 {
		t.Errorf("attempt %d; a snooze must not count one", rec.Attempt)
	}
}

// A worker stopped mid-run cancels its batch, whose transaction rolls
// back; the job is snoozed, another worker resumes from the last commit,
// and every row is processed exactly once.
func TestCheckpointedRunSurvivesAStoppedWorkerExactlyOnce(t *testing.T) {
	t.Parallel()
	b := pgHarness{}.NewBackend(t).(*pgBackend)
	job := newRowsJob(t, b.direct, 2000, 20, 20*time.Millisecond)
	rt := longRuntime(t, b, registry.Schedule{Timeout: time.Minute, MaxRetry: 0, Handler: job.handler})
	stop := riverWorkers(t, b, rt)
	occ, err := rt.Trigger(context.Background(), "long", "")
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, once, _ := job.processed(t); once >= 100 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no batch ran")
		}
	}
	stop()
	waitRecorded(t, rt, occ.ID, core.OutcomeContinued, 10*time.Second)
	if _, once, _ := job.processed(t); once == job.n {
		t.Fatal("the run finished before the worker stopped; the test proves nothing")
	}
	riverWorkers(t, b, rt)
	rec := waitRecorded(t, rt, occ.ID, core.OutcomeSucceeded, 30*time.Second)
	if never, once, more := job.processed(t); once != job.n {
		t.Errorf("rows processed never %d, once %d, more %d; want all %d exactly once", never, once, more, job.n)
	}
	if rec.Attempt != 0 || rec.Progress == nil || rec.Progress.Resumptions < 1 {
		t.Errorf("record: attempt %d, progress %+v; want attempt 0 and a resumption", rec.Attempt, rec.Progress)
	}
}

// A stale attempt's batch, saved in its transaction, is refused and rolls
// back with it: nothing of it stays, and the newer attempt does it once.
func TestStaleAttemptsBatchRollsBackWithItsSave(t *testing.T) {
	t.Parallel()
	db := migratedDB(t)
	e := newEngine(t, db, "a")
	job := newRowsJob(t, db, 100, 10, 0)
	job.beforeCommit = func(ctx context.Context, from int) error {
		if from != 30 {
			return nil
		}
		b, _ := checkpoint.CurrentBatch(ctx)
		_, err := e.ClaimProgress(context.Background(), b.Key, "", b.Key, time.Now().UnixMilli()) // a newer attempt
		return err
	}
	bind := func() context.Context {
		return checkpoint.Bind(context.Background(), &checkpoint.Binding{Store: e, Key: "occ"})
	}
	err := job.handler(bind(), registry.Occurrence{})
	if !errors.Is(err, engine.ErrSuperseded) {
		t.Fatalf("the stale attempt's Run = %v, want ErrSuperseded", err)
	}
	if never, once, _ := job.processed(t); once != 30 || never != 70 {
		t.Errorf("after the stale attempt: %d rows processed once, %d never; want 30 and 70 (its refused batch rolled back)", once, never)
	}
	job.beforeCommit = nil
	if err := job.handler(bind(), registry.Occurrence{}); err != nil {
		t.Fatal(err)
	}
	if never, once, more := job.processed(t); once != job.n {
		t.Errorf("rows processed never %d, once %d, more %d; want all %d exactly once", never, once, more, job.n)
	}
}

// resume=next on Postgres: the next occurrence finishes the failed one's
// rows from its committed cursor, then runs its own, and the scope has no
// unfinished work after.
func TestResumeNextOnPostgres(t *testing.T) {
	t.Parallel()
	db := migratedDB(t)
	e := newEngine(t, db, "a")
	job := newRowsJob(t, db, 100, 10, 0)
	job.beforeCommit = func(_ context.Context, from int) error {
		if from == 40 {
			return errors.New("night 1 gives up")
		}
		return nil
	}
	night := func(id string) error {
		ctx := checkpoint.Bind(context.Background(), &checkpoint.Binding{Store: e, Key: id, Scope: "prune"})
		return job.handler(ctx, registry.Occurrence{})
	}
	if err := night("night-1"); err == nil {
		t.Fatal("night 1 succeeded; the test needs it to fail")
	}
	if u, err := e.Unfinished(context.Background(), "prune"); err != nil || u != "night-1" {
		t.Fatalf("unfinished = %q, %v; want night-1", u, err)
	}
	job.beforeCommit = nil
	if err := night("night-2"); err != nil {
		t.Fatal(err)
	}
	// Night 2 finished night 1's rows (each once), then ran its own over
	// the same table: every row twice in all, none three times.
	var once, twice, other int
	if err := db.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE processed = 1), count(*) FILTER (WHERE processed = 2),
		count(*) FILTER (WHERE processed NOT IN (1, 2)) FROM work_item`).Scan(&once, &twice, &other); err != nil {
		t.Fatal(err)
	}
	if twice != job.n || once != 0 || other != 0 {
		t.Errorf("rows processed twice %d, once %d, otherwise %d; want every row twice (night 1's run, then night 2's own)", twice, once, other)
	}
	cps, _, err := e.Progresses(context.Background(), []string{"night-1", "night-2"})
	if err != nil {
		t.Fatal(err)
	}
	if !cps[0].Done || cps[0].By != "night-2" || cps[0].Items != int64(job.n) || !cps[1].Done {
		t.Errorf("progress %+v; want both done, night 1's %d rows finished by night 2", cps, job.n)
	}
	if u, _ := e.Unfinished(context.Background(), "prune"); u != "" {
		t.Errorf("unfinished = %q after night 2, want none", u)
	}
}

// resume=next on a family keeps each member's unfinished work apart, in a
// scope the text columns store.
func TestResumeNextScopesOfFamilyMembersOnPostgres(t *testing.T) {
	t.Parallel()
	db := migratedDB(t)
	e := newEngine(t, db, "a")
	ctx := context.Background()
	fam := &registry.Schedule{Name: "prune", Resume: registry.ResumeNext}
	scopes := map[string]string{}
	for _, member := range []string{"acme", "globex"} {
		scope := core.ResumeScope(fam, registry.Occurrence{Schedule: "prune", Member: member})
		id := "night-1-" + member
		if _, err := e.ClaimProgress(ctx, id, scope, id, time.Now().UnixMilli()); err != nil {
			t.Fatalf("claim for member %s: %v", member, err)
		}
		scopes[member] = scope
	}
	for member, scope := range scopes {
		if u, err := e.Unfinished(ctx, scope); err != nil || u != "night-1-"+member {
			t.Errorf("member %s: unfinished = %q, %v; want night-1-%s", member, u, err, member)
		}
	}
}
