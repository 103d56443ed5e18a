package directive

import (
	"context"

	"github.com/belfry/belfry/registry"
)

// Suppressed shows that a reasoned ignore silences its check.
//
//cronlint:ignore directive kept until the ops dashboard stops parsing CRON_TZ
//cron:schedule "CRON_TZ=UTC 0 3 * * *"
func Suppressed(ctx context.Context, occ registry.Occurrence) error { return nil }

// OtherCheck names a different check, so the directive is still reported.
//
// want +3 `bad cron expression`
//
//cronlint:ignore pileup the batch window is agreed with the DBA team
//cron:schedule "0 25 * * *"
func OtherCheck(ctx context.Context, occ registry.Occurrence) error { return nil }

// NoReason has an ignore without a reason.
//
// want +2 `//cronlint:ignore zone needs a reason`
//
//cronlint:ignore zone
//cron:schedule "0 3 * * *" tz=Europe/Paris
func NoReason(ctx context.Context, occ registry.Occurrence) error { return nil }

// want +2 `//cronlint:ignore names unknown check "pile-up"; checks are directive, idempotent`
//
//cronlint:ignore pile-up the reason
//cron:schedule "0 3 * * *"
func UnknownCheck(ctx context.Context, occ registry.Occurrence) error { return nil }

// want +2 `//cronlint:ignore needs a check and a reason`
//
//cronlint:ignore
//cron:schedule "0 3 * * *"
func Empty(ctx context.Context, occ registry.Occurrence) error { return nil }

// Stray is not a schedule.
//
// want +2 `//cronlint:ignore has no effect here`
//
//cronlint:ignore zone no directive to apply to
func Stray() {}
