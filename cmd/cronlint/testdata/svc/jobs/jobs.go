// Package jobs holds the service's scheduled work. Every handler works on
// the period its occurrence names and writes under the occurrence's key,
// so a retry, a second replica or a manual re-run changes nothing.
package jobs

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"time"

	"github.com/belfry/belfry/registry"
)

// DB is the service's database, set by main before the scheduler starts.
var DB *sql.DB

// PruneSoftDeleted removes rows soft-deleted more than 30 days before the
// occurrence.
//
//cron:schedule "17 3 * * *" name=prune-soft-deleted tz=UTC queue=maintenance timeout=20m
func PruneSoftDeleted(ctx context.Context, occ registry.Occurrence) error {
	cutoff := occ.Slot.AddDate(0, 0, -30)
	_, err := DB.ExecContext(ctx, `DELETE FROM accounts WHERE deleted_at < $1`, cutoff)
	return err
}

// DigestConfig says what the weekly digest covers.
type DigestConfig struct {
	Days    int
	MaxRows int
}

var weeklyDigest = DigestConfig{Days: 7, MaxRows: 500}

// SendDigest mails the digest of the week before the occurrence, once per
// occurrence: the outbox row is keyed by occ.Key().
//
//cron:schedule "42 7 * * MON" name=send-digest queue=mail timeout=10m retry=5 payload=weeklyDigest
func SendDigest(ctx context.Context, occ registry.Occurrence, cfg DigestConfig) error {
	from, to := week(occ.Slot, cfg.Days)
	_, err := DB.ExecContext(ctx,
		`INSERT INTO outbox (key, kind, period_from, period_to, max_rows) VALUES ($1, 'digest', $2, $3, $4)
		 ON CONFLICT (key) DO NOTHING`, occ.Key(), from, to, cfg.MaxRows)
	return err
}

func week(slot time.Time, days int) (from, to time.Time) {
	to = slot.Truncate(24 * time.Hour)
	return to.AddDate(0, 0, -days), to
}

// SyncInventory pulls stock levels for the quarter hour before the slot.
// A run that outlives the next slot is skipped rather than doubled.
//
//cron:schedule "*/15 * * * *" name=sync-inventory queue=sync timeout=20m overlap=skip
func SyncInventory(ctx context.Context, occ registry.Occurrence) error {
	slog.InfoContext(ctx, "syncing inventory", "from", occ.Slot.Add(-15*time.Minute), "to", occ.Slot, "key", occ.Key())
	return nil
}

// RollupHourly aggregates the hour that ended at the slot.
//
//cron:schedule "@every 1h" name=rollup-hourly timeout=45m grace=10m
func RollupHourly(ctx context.Context, occ registry.Occurrence) error {
	hour := occ.Slot.Add(-time.Hour)
	_, err := DB.ExecContext(ctx, `INSERT INTO rollups (hour) VALUES ($1) ON CONFLICT DO NOTHING`, hour)
	if err != nil {
		return fmt.Errorf("rollup %s: %w", occ.Key(), err)
	}
	return nil
}

// CloseBooks closes the Paris office's books at the end of its working day.
// cron: the finance team owns this schedule.
//
//cronlint:ignore zone the books close on the Paris office's clock, DST included
//cron:schedule "0 19 * * MON-FRI" name=close-books tz=Europe/Paris queue=finance misfire=latest
func CloseBooks(ctx context.Context, occ registry.Occurrence) error {
	day := occ.Slot.Format(time.DateOnly)
	_, err := DB.ExecContext(ctx, `UPDATE books SET closed = true WHERE day = $1`, day)
	return err
}
