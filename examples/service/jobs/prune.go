package jobs

import (
	"context"
	"log/slog"
	"time"

	"github.com/belfry/belfry/registry"
)

// retention is how long soft-deleted rows are kept before pruning.
const retention = 30 * 24 * time.Hour

// PruneSoftDeleted removes rows soft-deleted more than 30 days before the
// occurrence. The cutoff is fixed by the slot, so a run that is retried
// later prunes exactly the same rows.
//
//cron:schedule "17 3 * * *" name=prune-soft-deleted tz=UTC queue=maintenance timeout=20m
func PruneSoftDeleted(ctx context.Context, occ registry.Occurrence) error {
	cutoff := occ.Slot.UTC().Add(-retention)
	if !Effects.Put(occ.Key(), "pruned rows deleted before "+cutoff.Format(time.RFC3339)) {
		return nil
	}
	slog.InfoContext(ctx, "pruned soft-deleted rows", "deleted_before", cutoff, "key", occ.Key())
	return nil
}
