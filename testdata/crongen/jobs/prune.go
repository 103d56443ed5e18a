// Package jobs is a crongen fixture: schedules using every directive key.
package jobs

import (
	"context"
	"fmt"

	"github.com/belfry/belfry/registry"
)

// PruneSoftDeleted removes rows soft-deleted more than 30 days before the occurrence.
//
//cron:schedule "17 3 * * *" name=prune-soft-deleted tz=UTC queue=maintenance timeout=20m
func PruneSoftDeleted(ctx context.Context, occ registry.Occurrence) error {
	fmt.Println("prune", occ.Key())
	return nil
}

// cutoff is not a handler: a plain doc comment makes no schedule.
func cutoff(occ registry.Occurrence) string { return occ.Slot.AddDate(0, 0, -30).Format("2006-01-02") }
