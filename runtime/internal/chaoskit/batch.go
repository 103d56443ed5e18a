package chaoskit

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/belfry/belfry/runtime/checkpoint"
)

// The checkpointed long job every chaos run includes: one occurrence the
// harness triggers, whose handler goes through its items in batches with
// checkpoint.Run. It is long enough to outlast its own timeout several
// times and to be running while faults hit the replicas; after the faults
// the harness also SIGTERMs (a deploy) and then SIGKILLs (a crash) the
// replica whose worker runs it.
const (
	// BatchSchedule is the long job's schedule. Its expression never comes
	// due within a run: only the harness's trigger runs it.
	BatchSchedule = "batch"
	BatchExpr     = "0 0 1 1 *"
	// BatchSize is how many items one batch processes.
	BatchSize = 20
	// BatchPause is the least time a batch takes.
	BatchPause = 50 * time.Millisecond
	// BatchTimeout is the job's timeout: far shorter than the job.
	BatchTimeout = 5 * time.Second
	// BatchLogFile is the prefix of the per-process logs the handler
	// appends to: batch-<replica>.log.
	BatchLogFile = "batch-"
)

// BatchItems is how many items the long job has when it is triggered at
// offset at of a run: enough, at BatchPause a batch, to be still running
// well after the faults are over.
func (c Config) BatchItems(at time.Duration) int {
	work := c.Duration - at + 20*time.Second
	return BatchSize * int(work/BatchPause)
}

// BatchStep is the long job's step over items: each batch waits
// BatchPause, then has effect process items [from, to). effect is where
// an engine's exactly-once save goes (on Postgres the batch's rows and
// postgres.SaveCheckpoint in one transaction).
func BatchStep(items int, effect func(ctx context.Context, from, to int) error) checkpoint.Step {
	return func(ctx context.Context, cursor string) (string, bool, error) {
		from, _ := strconv.Atoi(cursor)
		to := min(from+BatchSize, items)
		select {
		case <-time.After(BatchPause):
		case <-ctx.Done():
			return "", false, ctx.Err()
		}
		checkpoint.SetTotal(ctx, int64(items))
		checkpoint.Add(ctx, int64(to-from))
		if err := effect(ctx, from, to); err != nil {
			return "", false, err
		}
		return strconv.Itoa(to), to == items, nil
	}
}

// BatchLog is a replica process's log of the long job, appended with one
// write per line so that a SIGKILL loses at most the line being written.
// Lines: "attempt <replica> <Unix ms>" when a handler starts, "batch <from> <to>
// <replica>" after a batch's effect, "done <replica>" when the job is.
type BatchLog struct {
	f       *os.File
	replica string
}

// OpenBatchLog opens replica's log in dir.
func OpenBatchLog(dir, replica string) (*BatchLog, error) {
	f, err := os.OpenFile(filepath.Join(dir, BatchLogFile+replica+".log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &BatchLog{f: f, replica: replica}, nil
}

func (l *BatchLog) Close() error { return l.f.Close() }

func (l *BatchLog) Attempt() error {
	_, err := fmt.Fprintf(l.f, "attempt %s %d\n", l.replica, time.Now().UnixMilli())
	return err
}

func (l *BatchLog) Batch(from, to int) error {
	_, err := fmt.Fprintf(l.f, "batch %d %d %s\n", from, to, l.replica)
	return err
}

func (l *BatchLog) Done() error {
	_, err := fmt.Fprintf(l.f, "done %s\n", l.replica)
	return err
}

// BatchRecord is what the replicas' logs say of the long job.
type BatchRecord struct {
	Attempts int
	// Processed counts each item's processings, from the batch lines.
	Processed map[int]int
	Done      bool
	// Batches counts each replica's batch lines: which worker is running
	// the job is the one whose count grows.
	Batches map[string]int
	// Began is when each replica's latest attempt began.
	Began map[string]time.Time
}

// ReadBatchLogs reads every replica's log of the long job in dir.
func ReadBatchLogs(dir string) (BatchRecord, error) {
	r := BatchRecord{Processed: map[int]int{}, Batches: map[string]int{}, Began: map[string]time.Time{}}
	files, err := filepath.Glob(filepath.Join(dir, BatchLogFile+"*.log"))
	if err != nil {
		return r, err
	}
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return r, err
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			switch {
			case len(fields) == 3 && fields[0] == "attempt":
				r.Attempts++
				if ms, err := strconv.ParseInt(fields[2], 10, 64); err == nil {
					r.Began[fields[1]] = time.UnixMilli(ms)
				}
			case len(fields) == 2 && fields[0] == "done":
				r.Done = true
			case len(fields) == 4 && fields[0] == "batch":
				from, err1 := strconv.Atoi(fields[1])
				to, err2 := strconv.Atoi(fields[2])
				if err1 != nil || err2 != nil {
					continue // a line cut short by a SIGKILL mid-write
				}
				for i := from; i < to; i++ {
					r.Processed[i]++
				}
				r.Batches[fields[3]]++
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return r, err
		}
	}
	return r, nil
}

// BatchCounts is the long job's line of the summary.
type BatchCounts struct {
	// Items is the job's size; Missing those never processed; Dups the
	// processings beyond each item's first.
	Items, Missing, Dups int
	// Attempts counts the handler's starts: the first, and one per
	// interruption (timeout, shutdown, crash, failed batch).
	Attempts           int
	SIGTERMs, SIGKILLs int
}

// CountBatch counts items processed as times says each was.
func CountBatch(items int, times func(item int) int) BatchCounts {
	c := BatchCounts{Items: items}
	for i := range items {
		switch n := times(i); {
		case n == 0:
			c.Missing++
		case n > 1:
			c.Dups += n - 1
		}
	}
	return c
}

// Summary is the keys the long job adds to the summary line.
func (c BatchCounts) Summary() string {
	return fmt.Sprintf(" batch_items=%d batch_dups=%d batch_missing=%d batch_attempts=%d batch_sigterms=%d batch_sigkills=%d",
		c.Items, c.Dups, c.Missing, c.Attempts, c.SIGTERMs, c.SIGKILLs)
}

// HitBatchWorker waits for the long job's next batch in the middle of an
// attempt (neither just begun nor near its timeout, so that sig, not the
// timeout, interrupts it) and sends sig to the process whose worker ran it, waits for it to exit and has restart start
// it again. It fails t and returns false if no batch comes within within,
// or the job was done first.
func HitBatchWorker(t testing.TB, dir string, procs []*Proc, sig syscall.Signal, within time.Duration, restart func(i int)) bool {
	t.Helper()
	before, err := ReadBatchLogs(dir)
	if err != nil {
		t.Errorf("chaos: reading the long job's logs: %v", err)
		return false
	}
	name := map[syscall.Signal]string{syscall.SIGTERM: "SIGTERM", syscall.SIGKILL: "SIGKILL"}[sig]
	hit := -1
	ok := WaitUntil(t, within, "a batch of the long job, to "+name+" its worker", func() bool {
		now, err := ReadBatchLogs(dir)
		if err != nil || now.Done {
			return now.Done
		}
		for i, p := range procs {
			since := time.Since(now.Began[p.Name])
			if p.State == Running && now.Batches[p.Name] > before.Batches[p.Name] &&
				since > time.Second && since < BatchTimeout-2*time.Second {
				hit = i
				return true
			}
		}
		return false
	})
	if !ok || hit < 0 {
		if ok {
			t.Errorf("chaos: the long job was done before its worker could be sent %s; it proves nothing: lengthen it", name)
		}
		return false
	}
	p := procs[hit]
	t.Logf("chaos %s: %s the long job's worker %s (pid %d)", time.Now().UTC().Format("15:04:05.000"), name, p.Name, p.Cmd.Process.Pid)
	p.Cmd.Process.Signal(sig)
	timer := time.NewTimer(30 * time.Second)
	defer timer.Stop()
	select {
	case <-p.Exited:
		if code := p.Cmd.ProcessState.ExitCode(); sig == syscall.SIGTERM && code != 0 {
			t.Errorf("chaos: replica %s exited with status %d on SIGTERM; see its log", p.Name, code)
		}
	case <-timer.C:
		t.Errorf("chaos: replica %s did not exit within 30s of %s; killing it", p.Name, name)
		p.Cmd.Process.Kill()
		<-p.Exited
	}
	p.State = Dead
	restart(hit)
	return true
}

// TriggerBatch runs the long job at at through trigger ("run now"),
// retrying while the engine is down. The returned channel closes when it
// is enqueued, or trigger failed for 15 s (which fails t).
func TriggerBatch(t testing.TB, at time.Time, items int, trigger func(context.Context) (id string, err error)) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(time.Until(at))
		for tries := 0; ; tries++ {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			id, err := trigger(ctx)
			cancel()
			if err == nil {
				t.Logf("chaos %s: operator: triggered the long job %s (%d items)", time.Now().UTC().Format("15:04:05.000"), id, items)
				return
			}
			if tries == 60 {
				t.Errorf("chaos: triggering the long job: %v", err)
				return
			}
			time.Sleep(250 * time.Millisecond)
		}
	}()
	return done
}

// StopAndKillBatchWorker stops the long job's worker as a deploy does
// (SIGTERM), then kills the next one that runs it (SIGKILL), having
// restart start each again; it returns the counts of both. Each waits
// for the job's next batch long enough for the engine to recover a task
// orphaned by a fault (asynq: its lease expired 30 s before its
// recoverer's next run).
func StopAndKillBatchWorker(t testing.TB, dir string, procs []*Proc, restart func(i int)) BatchCounts {
	var c BatchCounts
	if HitBatchWorker(t, dir, procs, syscall.SIGTERM, 150*time.Second, restart) {
		c.SIGTERMs++
	}
	if HitBatchWorker(t, dir, procs, syscall.SIGKILL, 150*time.Second, restart) {
		c.SIGKILLs++
	}
	return c
}
