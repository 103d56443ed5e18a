package main

import (
	"net/http"
	"testing"
	"time"

	"github.com/belfry/belfry/internal/pgtest"
)

type apiProgress struct {
	Cursor      string `json:"cursor"`
	Done        bool   `json:"done"`
	Items       int64  `json:"items_done"`
	Resumptions int64  `json:"resumptions"`
}

// checkPrune has a replica prune the rows it seeded, in its engine's own
// store, by a "run now" of the checkpointed prune job: every row goes, and
// the occurrence's record shows the progress the batches saved.
func checkPrune(t *testing.T, redisURL string, args ...string) {
	r := startReplica(t, redisURL, "r1", args...)
	waitFor(t, 20*time.Second, "the rows seeded", func() bool { return len(r.log.lines("seeded soft-deleted rows")) > 0 })
	if status, body := post(t, r.base+"api/schedules/prune-soft-deleted/trigger", http.Header{}); status != http.StatusAccepted {
		t.Fatalf("trigger: %d %s", status, body)
	}
	var progress *apiProgress
	waitFor(t, 30*time.Second, "the prune to succeed", func() bool {
		var s struct {
			History []struct {
				Outcome  string       `json:"outcome"`
				Progress *apiProgress `json:"progress"`
			} `json:"history"`
		}
		if err := r.getJSON(t, "api/schedules/prune-soft-deleted", &s); err != nil || len(s.History) == 0 {
			return false
		}
		progress = s.History[0].Progress
		return s.History[0].Outcome == "succeeded"
	})
	if progress == nil || !progress.Done || progress.Items != seededRows || progress.Cursor != "row-05000" {
		t.Errorf("progress %+v; want done, %d rows, cursor row-05000", progress, seededRows)
	}
}

func TestPruneIsCheckpointedInRedis(t *testing.T) {
	t.Parallel()
	checkPrune(t, startRedis(t))
}

func TestPruneIsCheckpointedInPostgres(t *testing.T) {
	t.Parallel()
	checkPrune(t, "", "-postgres", pgtest.NewDatabase(t, "belfry_service_test"), "-migrate")
}
