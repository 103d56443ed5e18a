package postgres_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/core"
	"github.com/belfry/belfry/runtime/postgres"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
)

var longFlag = flag.Bool("long", false, "run the long tests (make test/long)")

// The checkpoint worker process: what TestCheckpointedRunSurvivesSIGKILLAndSIGTERM starts.
const (
	envCheckpointURL = "BELFRY_CHECKPOINT_WORKER_URL"
	checkpointNS     = "checkpoint-kill"
	checkpointRows   = 6000
)

// checkpointRegistry is the worker's and the test's schedule: a
// checkpointed run over work_item, 20 rows a batch, each batch taking a
// moment, so that the run outlasts its timeout and lasts long enough to be
// killed in the middle. (River rescues a SIGKILLed worker's job once its
// own timeout has passed.)
func checkpointRegistry(db *pgxpool.Pool) *registry.Registry {
	job := &rowsJob{db: db, n: checkpointRows, batch: 20, pause: 20 * time.Millisecond}
	return registry.MustNew(registry.Schedule{Name: "long", Expr: "17 3 * * *", Timeout: 3 * time.Second, MaxRetry: 3,
		Handler: job.handler})
}

// TestCheckpointWorkerProcess is the body of a worker process; run
// directly it skips.
func TestCheckpointWorkerProcess(t *testing.T) {
	url := os.Getenv(envCheckpointURL)
	if url == "" {
		t.Skip("worker process of TestCheckpointedRunSurvivesSIGKILLAndSIGTERM; runs only when that test starts it")
	}
	if err := runCheckpointWorker(url); err != nil {
		t.Fatal(err)
	}
}

func runCheckpointWorker(url string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return err
	}
	defer pool.Close()
	eng, err := postgres.New(postgres.Config{Pool: pool})
	if err != nil {
		return err
	}
	rt, err := core.New(checkpointRegistry(pool), core.Options{Engine: eng, Namespace: checkpointNS, Logger: quietLogger()})
	if err != nil {
		return err
	}
	defer rt.Close()
	workers := river.NewWorkers()
	if err := postgres.AddWorkers(workers, rt); err != nil {
		return err
	}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues: map[string]river.QueueConfig{registry.QueueDefault: {MaxWorkers: 2}}, Workers: workers, Logger: quietLogger(),
		FetchCooldown: 10 * time.Millisecond, FetchPollInterval: 50 * time.Millisecond, RetryPolicy: promptRetry{},
		// The job of a SIGKILLed worker is rescued by the next worker's
		// rescuer, which runs when it starts. (JobTimeout is only River's
		// floor for it: the schedule's timeout is the job's.)
		RescueStuckJobsAfter: time.Second, JobTimeout: time.Second,
	})
	if err != nil {
		return err
	}
	if err := client.Start(context.Background()); err != nil {
		return err
	}
	fmt.Println("started")
	<-ctx.Done()
	// A deploy: running jobs are cancelled; a checkpointed one saves its
	// place and snoozes.
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return client.StopAndCancel(stopCtx)
}

// A checkpointed run over a real table survives, in one run, its timeout
// (continued in snoozes), a worker's SIGKILL (its job rescued by River, the retry resuming after the last
// committed batch) and a worker's SIGTERM (saved, snoozed, continued): it
// finishes with every row processed exactly once, as one occurrence with
// its resumptions.
func TestCheckpointedRunSurvivesSIGKILLAndSIGTERM(t *testing.T) {
	if !*longFlag {
		t.Skip("a River leader's lease must lapse after the SIGKILL: run with -long (make test/long)")
	}
	t.Parallel()
	cfg := newDatabase(t)
	url := cfg.ConnString()
	ctx := context.Background()
	db, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := postgres.Migrate(ctx, db, postgres.MigrateOptions{River: true}); err != nil {
		t.Fatal(err)
	}
	job := newRowsJob(t, db, checkpointRows, 20, 0)
	eng, err := postgres.New(postgres.Config{Pool: db})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := core.New(checkpointRegistry(db), core.Options{Engine: eng, Namespace: checkpointNS, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	startWorker := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCheckpointWorkerProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), envCheckpointURL+"="+url)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	processedAtLeast := func(n int, what string) {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if _, once, _ := job.processed(t); once >= n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: fewer than %d rows processed", what, n)
			}
		}
	}
	first := startWorker()
	occ, err := rt.Trigger(ctx, "long", "")
	if err != nil {
		t.Fatal(err)
	}
	processedAtLeast(400, "before the SIGKILL")
	first.Process.Signal(syscall.SIGKILL)
	first.Wait()
	atKill, _, _ := job.processed(t)
	second := startWorker()
	processedAtLeast(checkpointRows-atKill+600, "after the SIGKILL")
	second.Process.Signal(syscall.SIGTERM)
	if err := second.Wait(); err != nil {
		t.Errorf("the SIGTERMed worker: %v", err)
	}
	waitRecorded(t, rt, occ.ID, core.OutcomeContinued, 10*time.Second)
	if never, _, _ := job.processed(t); never == 0 {
		t.Fatal("the run finished before the SIGTERM; the test proves nothing")
	}
	startWorker()
	rec := waitRecorded(t, rt, occ.ID, core.OutcomeSucceeded, 60*time.Second)
	if never, once, more := job.processed(t); once != checkpointRows {
		t.Errorf("rows processed never %d, once %d, more %d; want all %d exactly once", never, once, more, checkpointRows)
	}
	if p := rec.Progress; p == nil || !p.Done || p.Items != checkpointRows || p.Resumptions < 3 {
		t.Errorf("progress %+v; want done, %d items, at least 3 resumptions (a timeout, the rescue, the SIGTERM)", p, checkpointRows)
	}
}
