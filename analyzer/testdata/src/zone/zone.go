package zone

import (
	"context"

	"github.com/belfry/belfry/registry"
)

// want +2 `schedule "zone.london" runs at wall times in Europe/London that daylight saving time breaks: 01:30 does not exist on 2026-03-29 \(clocks go forward from 01:00 to 02:00\), so it runs at 02:00 BST instead; 01:30 happens twice on 2026-10-25 \(clocks go back from 02:00 to 01:00\), so it runs once, at the first; schedule in UTC \(tz=UTC\)`
//
//cron:schedule "30 1 * * *" tz=Europe/London
func London(ctx context.Context, occ registry.Occurrence) error { return nil }

// want +2 `"zone.new-york-gap" .*: 02:30 does not exist on 2026-03-08 \(clocks go forward from 02:00 to 03:00\), so it runs at 03:00 EDT instead; schedule in UTC`
//
//cron:schedule "30 2 * * *" tz=America/New_York
func NewYorkGap(ctx context.Context, occ registry.Occurrence) error { return nil }

// want +2 `"zone.new-york-fold" .*: 01:30 happens twice on 2026-11-01 \(clocks go back from 02:00 to 01:00\), so it runs once, at the first; schedule in UTC`
//
//cron:schedule "30 1 * * *" tz=America/New_York
func NewYorkFold(ctx context.Context, occ registry.Occurrence) error { return nil }

// H takes minute 13 from the name; the traps are found all the same.
//
// want +2 `"nightly-report" .*: 01:13 does not exist on 2026-03-29 .*; 01:13 happens twice on 2026-10-25`
//
//cron:schedule "H 1 * * *" name=nightly-report tz=Europe/London
func HashedLondon(ctx context.Context, occ registry.Occurrence) error { return nil }

// Lord Howe Island moves its clocks by half an hour.
//
// want +2 `"zone.lord-howe" .*: 02:15 does not exist on 2026-10-04 \(clocks go forward from 02:00 to 02:30\), so it runs at 02:30 \+11 instead`
//
//cron:schedule "15 2 * * *" tz=Australia/Lord_Howe
func LordHowe(ctx context.Context, occ registry.Occurrence) error { return nil }

// want +2 `schedule "zone.berlin" runs in Europe/Berlin; schedule in UTC and convert for display: a local zone shifts with daylight saving time`
//
//cron:schedule "0 9 * * *" tz=Europe/Berlin
func Berlin(ctx context.Context, occ registry.Occurrence) error { return nil }

// Wildcard schedules follow the clock through transitions by design.
//
// want +2 `schedule "zone.hourly" runs in America/New_York; schedule in UTC and convert for display`
//
//cron:schedule "0 * * * *" tz=America/New_York
func Hourly(ctx context.Context, occ registry.Occurrence) error { return nil }

// want +2 `schedule "zone.tokyo" runs in Asia/Tokyo; schedule in UTC`
//
//cron:schedule "0 9 * * *" tz=Asia/Tokyo
func Tokyo(ctx context.Context, occ registry.Occurrence) error { return nil }

// want +2 `tz=Europe/Paris has no effect on "@every 1h": @every slots are whole multiples of the period since the Unix epoch; drop tz=`
//
//cron:schedule "@every 1h" tz=Europe/Paris
func Every(ctx context.Context, occ registry.Occurrence) error { return nil }

//cron:schedule "30 1 * * *" tz=UTC
func UTC(ctx context.Context, occ registry.Occurrence) error { return nil }

//cron:schedule "30 1 * * *" tz=Etc/UTC
func EtcUTC(ctx context.Context, occ registry.Occurrence) error { return nil }

//cron:schedule "30 1 * * *"
func Default(ctx context.Context, occ registry.Occurrence) error { return nil }

// Suppressed is reported by nothing.
//
//cronlint:ignore zone the invoice run follows the Paris office's working day
//cron:schedule "30 2 * * *" tz=Europe/Paris
func Suppressed(ctx context.Context, occ registry.Occurrence) error { return nil }
