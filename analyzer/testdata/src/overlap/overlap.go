package overlap

import (
	"context"

	"github.com/belfry/belfry/registry"
)

// want +2 `timeout=20m is longer than the shortest gap between two occurrences of "overlap.quarter-hour" \(15m, e.g. from 2026-01-01 00:00:00 UTC\): a slow run is still going when the next one starts; add overlap=skip or shorten the timeout`
//
//cron:schedule "*/15 * * * *" timeout=20m
func QuarterHour(ctx context.Context, occ registry.Occurrence) error { return nil }

// The default timeout (30m) applies when timeout= is absent.
//
// want +2 `the default timeout of 30m is longer than the shortest gap between two occurrences of "overlap.every-minute" \(1m, e.g. from 2026-01-01 00:00:00 UTC\)`
//
//cron:schedule "* * * * *" queue=fast
func EveryMinute(ctx context.Context, occ registry.Occurrence) error { return nil }

// An explicit overlap=allow is turned into skip rather than duplicated.
//
// want +2 `timeout=2h is longer than the shortest gap between two occurrences of "overlap.every-hour" \(1h\)`
//
//cron:schedule "@every 1h" timeout=2h overlap=allow
func EveryHour(ctx context.Context, occ registry.Occurrence) error { return nil }

// Twice a day, but only 30 minutes apart.
//
// want +2 `timeout=45m is longer than the shortest gap between two occurrences of "overlap.close-pair" \(30m, e.g. from 2026-01-01 09:00:00 UTC\)`
//
//cron:schedule "0,30 9 * * *" timeout=45m
func ClosePair(ctx context.Context, occ registry.Occurrence) error { return nil }

// On the day clocks go back, 01:00 and 02:00 New York time are two hours
// apart, but in spring 01:30 and 03:00 are only half an hour apart.
//
// want +2 `timeout=45m is longer than the shortest gap between two occurrences of "overlap.spring" \(30m, e.g. from 2026-03-08 06:30:00 UTC\)`
//
//cron:schedule "30 1,2 * * *" tz=America/New_York timeout=45m
func Spring(ctx context.Context, occ registry.Occurrence) error { return nil }

//cron:schedule "*/15 * * * *" timeout=20m overlap=skip
func Skipped(ctx context.Context, occ registry.Occurrence) error { return nil }

//cron:schedule "*/15 * * * *" timeout=15m
func Exact(ctx context.Context, occ registry.Occurrence) error { return nil }

//cron:schedule "17 3 * * *"
func Daily(ctx context.Context, occ registry.Occurrence) error { return nil }

//cronlint:ignore overlap the handler takes a row lock and returns at once when it is held
//cron:schedule "*/5 * * * *"
func Locked(ctx context.Context, occ registry.Occurrence) error { return nil }
