package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/belfry/belfry/internal/redistest"
	"github.com/belfry/belfry/runtime/engine"
	"github.com/belfry/belfry/runtime/internal/pipeline"
	"github.com/belfry/belfry/runtime/internal/store"
)

// With acknowledgements on, a claim and a save of progress count only
// once a replica has them: a failover to a replica without them would
// hand an older claim generation back, or resume from an older cursor.
// The shared Redis has no replicas, so each WAIT comes back short; the
// writes themselves still ran.
func TestProgressWritesWaitForReplicaAcks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := store.New(redistest.Shared(t), redistest.Uniq("progressacks"), 3, time.Hour)
	s.Acks = pipeline.Acks{Replicas: 1, Timeout: 20 * time.Millisecond}

	_, err := s.ClaimProgress(ctx, "occ-1", "prune", "occ-1", 1000)
	if !errors.Is(err, engine.ErrNotAcked) {
		t.Fatalf("ClaimProgress with no replica to acknowledge it: error %v, want ErrNotAcked", err)
	}
	cps, ok, err := s.Progresses(ctx, []string{"occ-1"})
	if err != nil || !ok[0] || cps[0].Gen != 1 {
		t.Fatalf("the unacknowledged claim did not run in Redis: %+v, %v, %v", cps, ok, err)
	}
	err = s.SaveProgress(ctx, "occ-1", "prune", engine.Checkpoint{Gen: 1, Cursor: "40", Items: 40, UpdatedAt: 2000})
	if !errors.Is(err, engine.ErrNotAcked) {
		t.Errorf("SaveProgress with no replica to acknowledge it: error %v, want ErrNotAcked", err)
	}
	if cps, _, err := s.Progresses(ctx, []string{"occ-1"}); err != nil || cps[0].Cursor != "40" {
		t.Errorf("the unacknowledged save did not run in Redis: %+v, %v", cps, err)
	}
}
