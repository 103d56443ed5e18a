package jobs

import (
	"context"
	"log/slog"
	"time"

	"github.com/belfry/belfry/registry"
)

// ReconcilePayments matches the payment provider's settlements of the hour
// that ended before the slot against the ledger. It runs 41 minutes past
// the hour because the provider's report lands late. A slow run must not
// pile up behind itself, so a slot that comes due while the previous
// occurrence is still running is skipped.
//
//cron:schedule "41 * * * *" name=reconcile-payments tz=UTC timeout=30m overlap=skip
func ReconcilePayments(ctx context.Context, occ registry.Occurrence) error {
	to := occ.Slot.UTC().Truncate(time.Hour)
	from := to.Add(-time.Hour)
	if !Effects.Put(occ.Key(), "reconciled "+from.Format(time.RFC3339)+"–"+to.Format(time.RFC3339)) {
		return nil
	}
	slog.InfoContext(ctx, "reconciled payments", "from", from, "to", to, "key", occ.Key())
	return nil
}
