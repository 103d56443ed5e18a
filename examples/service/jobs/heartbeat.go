package jobs

import (
	"context"
	"log/slog"

	"github.com/belfry/belfry/registry"
)

// Heartbeat runs every second so that the admin page shows occurrences
// arriving, one per slot, whichever replica leads. Its timeout is the
// interval: a beat that takes longer is already stale.
//
//cron:schedule "* * * * * *" name=heartbeat tz=UTC timeout=1s retry=0
func Heartbeat(ctx context.Context, occ registry.Occurrence) error {
	slog.DebugContext(ctx, "heartbeat", "slot", occ.Slot, "key", occ.Key())
	return nil
}
