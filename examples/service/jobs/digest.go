package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/belfry/belfry/registry"
)

// DigestConfig says who gets the weekly digest.
type DigestConfig struct {
	To      string
	MaxRows int
}

var weeklyDigest = DigestConfig{To: "team@example.com", MaxRows: 500}

// SendDigest mails the digest of the ISO week before the occurrence. The
// week comes from the slot, so a retry on Tuesday still sends last week's
// digest, and the mail is keyed by the occurrence, so it goes out once.
//
//cron:schedule "5 8 * * MON" name=send-digest tz=UTC timeout=10m retry=5 payload=weeklyDigest
func SendDigest(ctx context.Context, occ registry.Occurrence, cfg DigestConfig) error {
	year, week := digestWeek(occ.Slot)
	subject := fmt.Sprintf("Weekly digest %d-W%02d", year, week)
	if !Effects.Put(occ.Key(), "mail to "+cfg.To+": "+subject) {
		slog.InfoContext(ctx, "digest already sent", "key", occ.Key())
		return nil
	}
	slog.InfoContext(ctx, "digest sent", "to", cfg.To, "subject", subject, "max_rows", cfg.MaxRows,
		"manual", occ.Manual, "key", occ.Key())
	return nil
}

// digestWeek is the ISO week that ended before slot: Monday's run reports
// on the whole previous week, whichever day of it the slot falls on.
func digestWeek(slot time.Time) (year, week int) {
	return slot.AddDate(0, 0, -7).ISOWeek()
}
