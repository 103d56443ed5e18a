package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/belfry/belfry/internal/pgtest"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

var longFlag = flag.Bool("long", false, "run the long tests (make test/long)")

// The archive run the tests make: 100 events a batch, each batch waiting
// the throttle first, so that one attempt outlasts the job's 10 s timeout
// and the run is still going after the SIGTERM (and the SIGKILL).
const (
	archiveEvents   = 8000
	archiveBatch    = 100
	archiveThrottle = "250ms"
)

// archiveStore is where a test's replicas keep the events, read directly:
// how many times each event was copied to the archive.
type archiveStore struct {
	redisURL string   // "" on Postgres
	args     []string // the engine's flags
	copies   func(t *testing.T) map[int]int
	// exactlyOnce: each batch commits with its checkpoint; else a batch
	// a worker's crash cut off after its copies is copied again.
	exactlyOnce bool
}

func redisArchive(t *testing.T) archiveStore {
	url := startRedis(t)
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { rdb.Close() })
	key := exampleNamespace() + ":example:{events}:archive"
	return archiveStore{redisURL: url, copies: func(t *testing.T) map[int]int {
		ids, err := rdb.LRange(context.Background(), key, 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		m := map[int]int{}
		for _, id := range ids {
			n, err := strconv.Atoi(id)
			if err != nil {
				t.Fatalf("archive entry %q: %v", id, err)
			}
			m[n]++
		}
		return m
	}}
}

func postgresArchive(t *testing.T) archiveStore {
	url := pgtest.NewDatabase(t, "belfry_service_test")
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return archiveStore{args: []string{"-postgres", url, "-migrate"}, exactlyOnce: true, copies: func(t *testing.T) map[int]int {
		rows, err := pool.Query(context.Background(), `SELECT event_id, count(*) FROM example_event_archive GROUP BY event_id`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		m := map[int]int{}
		for rows.Next() {
			var id, n int
			if err := rows.Scan(&id, &n); err != nil {
				t.Fatal(err)
			}
			m[id] = n
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return m
	}}
}

type archiveHistory struct {
	History []struct {
		ID       string       `json:"task_id"`
		Outcome  string       `json:"outcome"`
		Progress *apiProgress `json:"progress"`
	} `json:"history"`
}

// checkArchive runs the archive job in the example service through, in
// one run, its timeout (the first replica's attempt outlasts it), a
// deploy's SIGTERM of the replica running it and, with kill, a SIGKILL
// of the next one. Each time one replica alone runs, so the one signalled
// is the one running the job. It finishes with every event archived
// (once, or with at most one batch twice where batches are at least
// once), as one occurrence whose resumptions the admin's JSON and page
// show.
func checkArchive(t *testing.T, store archiveStore, kill bool) {
	args := append([]string{"-seed-events", strconv.Itoa(archiveEvents), "-archive-throttle", archiveThrottle}, store.args...)
	history := func(r *replica) archiveHistory {
		var h archiveHistory
		if err := r.getJSON(t, "api/schedules/archive-events", &h); err != nil {
			t.Logf("reading the history: %v", err)
		}
		return h
	}
	latest := func(r *replica) (outcome string, p apiProgress) {
		h := history(r)
		if len(h.History) == 0 || h.History[0].Progress == nil {
			return "", p
		}
		return h.History[0].Outcome, *h.History[0].Progress
	}
	r1 := startReplica(t, store.redisURL, "r1", args...)
	waitFor(t, 20*time.Second, "the events seeded", func() bool { return len(r1.log.lines("seeded events")) > 0 })
	if status, body := post(t, r1.base+"api/schedules/archive-events/trigger", http.Header{}); status != http.StatusAccepted {
		t.Fatalf("trigger: %d %s", status, body)
	}

	// The timeout: r1's attempt outlasts it and continues, on r1.
	waitFor(t, 40*time.Second, "the first attempt to reach its timeout and continue", func() bool {
		_, p := latest(r1)
		return p.Resumptions >= 1 && p.Items > 0
	})
	if outcome, p := latest(r1); p.Done {
		t.Fatalf("the run was done (%s) before the SIGTERM; it proves nothing: %+v", outcome, p)
	}
	if state := r1.stop(t, syscall.SIGTERM); state == nil || state.ExitCode() != 0 {
		t.Fatalf("r1 on SIGTERM: %v", state)
	}

	r2 := startReplica(t, store.redisURL, "r2", args...)
	outcome, atTerm := latest(r2)
	if outcome != "continued" && outcome != "running" || atTerm.Done {
		t.Errorf("after the SIGTERM the occurrence is %s with %+v; want continued (or running again), not done", outcome, atTerm)
	}
	last := r2
	if kill {
		waitFor(t, 60*time.Second, "the run to go on after the SIGTERM", func() bool {
			_, p := latest(r2)
			return p.Items >= atTerm.Items+5*archiveBatch && !p.Done
		})
		if err := r2.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		<-r2.done
		// asynq recovers the task once its lease has been expired for
		// 30 s; River rescues the job a minute after its attempt began.
		last = startReplica(t, store.redisURL, "r3", args...)
	}
	waitFor(t, 4*time.Minute, "the archive to succeed", func() bool {
		outcome, p := latest(last)
		return outcome == "succeeded" && p.Done
	})

	h := history(last)
	ids := map[string]int{}
	for _, rec := range h.History {
		ids[rec.ID]++
	}
	final := *h.History[0].Progress
	t.Logf("one occurrence, %d records: %v; progress %+v", len(h.History), ids, final)
	if len(ids) != 1 {
		t.Errorf("the run is recorded as %d occurrences (%v); want one", len(ids), ids)
	}
	want := int64(2) // the timeout, the SIGTERM
	if kill {
		want = 3
	}
	if final.Items != archiveEvents || final.Resumptions < want {
		t.Errorf("progress %+v; want %d items and at least %d resumptions", final, archiveEvents, want)
	}

	copies := store.copies(t)
	twice := 0
	for id := 1; id <= archiveEvents; id++ {
		switch n := copies[id]; {
		case n == 0:
			t.Errorf("event %d was never archived", id)
		case n > 1:
			twice += n - 1
		}
	}
	if len(copies) != archiveEvents {
		t.Errorf("%d events archived; want %d", len(copies), archiveEvents)
	}
	switch {
	case store.exactlyOnce && twice > 0:
		t.Errorf("%d events archived more than once; want each exactly once", twice)
	case !store.exactlyOnce && (twice > archiveBatch || !kill && twice > 0):
		t.Errorf("%d events archived again; want none without a crash, at most one batch (%d) after one", twice, archiveBatch)
	}
	t.Logf("events archived twice: %d", twice)

	// The page shows the one occurrence's progress with its resumptions.
	resp, err := http.Get(last.base + "schedules/archive-events")
	if err != nil {
		t.Fatal(err)
	}
	page, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{fmt.Sprintf("%d items", archiveEvents), fmt.Sprintf("%d resumptions", final.Resumptions)} {
		if !strings.Contains(string(page), s) {
			t.Errorf("the schedule's page does not show %q", s)
		}
	}
}

func TestArchiveSurvivesTimeoutAndSIGTERMOnRedis(t *testing.T) {
	t.Parallel()
	checkArchive(t, redisArchive(t), false)
}

func TestArchiveSurvivesTimeoutAndSIGTERMOnPostgres(t *testing.T) {
	t.Parallel()
	checkArchive(t, postgresArchive(t), false)
}

func TestArchiveSurvivesTimeoutSIGTERMAndSIGKILLOnRedis(t *testing.T) {
	if !*longFlag {
		t.Skip("asynq recovers a killed worker's task a minute after its lease: run with -long (make test/long)")
	}
	t.Parallel()
	checkArchive(t, redisArchive(t), true)
}

func TestArchiveSurvivesTimeoutSIGTERMAndSIGKILLOnPostgres(t *testing.T) {
	if !*longFlag {
		t.Skip("River rescues a killed worker's job a minute after it began: run with -long (make test/long)")
	}
	t.Parallel()
	checkArchive(t, postgresArchive(t), true)
}
