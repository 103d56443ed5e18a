package jobs

import (
	"context"
	"log/slog"
	"time"

	"github.com/belfry/belfry/registry"
)

// retention is how long soft-deleted rows are kept before pruning.
const retention = 30 * 24 * time.Hour

// Jobs holds what the method handlers need. main builds one at start-up
// and passes it to NewRegistry, which binds each method to it.
type Jobs struct {
	DB *DB
}

// PruneSoftDeleted removes rows soft-deleted more than 30 days before the
// occurrence. The cutoff is fixed by the slot, so a run that is retried
// later prunes exactly the same rows, and a repeat removes nothing more.
//
//cron:schedule "17 3 * * *" name=prune-soft-deleted tz=UTC queue=maintenance timeout=20m
func (j *Jobs) PruneSoftDeleted(ctx context.Context, occ registry.Occurrence) error {
	cutoff := occ.Slot.UTC().Add(-retention)
	n, err := j.DB.PurgeDeletedBefore(ctx, cutoff)
	if err != nil {
		return err
	}
	slog.InfoContext(ctx, "pruned soft-deleted rows", "deleted_before", cutoff, "rows", n, "key", occ.Key())
	return nil
}
