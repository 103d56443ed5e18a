package jobs

import (
	"context"
	"log/slog"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/checkpoint"
)

// retention is how long soft-deleted rows are kept before pruning.
const retention = 30 * 24 * time.Hour

// pruneBatch is how many rows one batch of the prune removes.
const pruneBatch = 500

// Jobs holds what the method handlers need. main builds one at start-up
// and passes it to NewRegistry, which binds each method to it.
type Jobs struct {
	DB SoftDeletedRows
	// Events are the events ArchiveEvents copies; ArchiveThrottle is how
	// long it waits before each batch.
	Events          Events
	ArchiveThrottle time.Duration
}

// PruneSoftDeleted removes rows soft-deleted more than 30 days before the
// occurrence, a batch at a time. The cutoff is fixed by the slot, so a run
// that is retried later prunes exactly the same rows. The checkpoint keeps
// its place: a timeout, a deploy or a crashed worker resumes after the last
// saved batch, and with resume=next tomorrow's run first finishes what
// tonight's left.
//
//cron:schedule "17 3 * * *" name=prune-soft-deleted tz=UTC queue=maintenance timeout=20m resume=next
func (j *Jobs) PruneSoftDeleted(ctx context.Context, occ registry.Occurrence) error {
	cutoff := occ.Slot.UTC().Add(-retention)
	rows := 0
	err := checkpoint.Run(ctx, func(ctx context.Context, cursor string) (string, bool, error) {
		last, n, err := j.DB.PurgeBatch(ctx, cursor, cutoff, pruneBatch)
		if err != nil {
			return "", false, err
		}
		rows += n
		return cmpCursor(last, cursor), n < pruneBatch, nil
	})
	if err != nil {
		return err
	}
	slog.InfoContext(ctx, "pruned soft-deleted rows", "deleted_before", cutoff, "rows", rows, "key", occ.Key())
	return nil
}
