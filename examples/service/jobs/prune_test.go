package jobs

import (
	"context"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
)

// TestPruneRunsOnTheGivenDB runs the prune occurrence as a worker would,
// through the registry NewRegistry binds to a DB, and checks that the rows
// are the slot's and that a retry of the same occurrence changes nothing.
func TestPruneRunsOnTheGivenDB(t *testing.T) {
	t.Parallel()
	db := NewDB()
	slot := time.Date(2026, 3, 8, 3, 17, 0, 0, time.UTC)
	db.SoftDelete("old", slot.Add(-retention-time.Hour))
	db.SoftDelete("recent", slot.Add(-retention+time.Hour))
	reg := NewRegistry(&Jobs{DB: db})
	s, ok := reg.Lookup(TaskPruneSoftDeleted)
	if !ok {
		t.Fatalf("no schedule %s in %d schedules", TaskPruneSoftDeleted, reg.Len())
	}
	payload := registry.EncodeOccurrence(s.Occurrence("", slot))
	for range 2 { // the second is asynq's retry of the same occurrence
		if err := s.HandlePayload(context.Background(), payload); err != nil {
			t.Fatal(err)
		}
	}
	if _, old := db.softDeleted["old"]; old {
		t.Error("the row deleted before the cutoff is still there")
	}
	if _, recent := db.softDeleted["recent"]; !recent {
		t.Error("the row deleted after the cutoff was pruned")
	}
}
