package pileup

import (
	"context"

	"github.com/belfry/belfry/registry"
)

// want +2 `schedule "nightly-a" fires in the same minute as "ignored", "london" and "nightly-b" \(00:00 UTC, midnight, .*366 times in the sample year\); spread the load: "28 0 \* \* \*" uses minute 28`
//
//cron:schedule "0 0 * * *" name=nightly-a
func NightlyA(ctx context.Context, occ registry.Occurrence) error { return nil }

// want +2 `"nightly-b" fires in the same minute as "ignored", "london" and "nightly-a" .* "44 0 \* \* \*"`
//
//cron:schedule "@daily" name=nightly-b
func NightlyB(ctx context.Context, occ registry.Occurrence) error { return nil }

// London's midnight is UTC midnight in winter only.
//
// want +2 `"london" fires in the same minute as "ignored", "nightly-a" and "nightly-b" \(00:00 UTC.*first on 2026-01-01, 156 times in the sample year\)`
//
//cron:schedule "0 0 * * *" name=london tz=Europe/London
func London(ctx context.Context, occ registry.Occurrence) error { return nil }

// Ignored still counts for the others, but is not reported itself.
//
//cronlint:ignore pileup the warehouse export must start at midnight sharp
//cron:schedule "0 0 * * *" name=ignored
func Ignored(ctx context.Context, occ registry.Occurrence) error { return nil }

// Frequent fires more than hourly and takes no part.
//
//cron:schedule "*/5 * * * *" name=frequent
func Frequent(ctx context.Context, occ registry.Occurrence) error { return nil }

// Twice an hour is left out too.
//
//cron:schedule "0,30 0 * * *" name=half-hourly
func HalfHourly(ctx context.Context, occ registry.Occurrence) error { return nil }

// Two are below the default threshold.
//
//cron:schedule "30 2 * * *" name=two-a
func TwoA(ctx context.Context, occ registry.Occurrence) error { return nil }

//cron:schedule "30 2 * * *" name=two-b
func TwoB(ctx context.Context, occ registry.Occurrence) error { return nil }

// want +2 `"seconds" fires in the same minute as "morning" and "weekdays" \(06:15 UTC; first on 2026-01-01, 262 times in the sample year\); spread the load: "0 52 6 \* \* \*" uses minute 52`
//
//cron:schedule "0 15 6 * * *" name=seconds
func Seconds(ctx context.Context, occ registry.Occurrence) error { return nil }

// want +2 `"morning" fires in the same minute as "seconds" and "weekdays"`
//
//cron:schedule "15 6 * * *" name=morning
func Morning(ctx context.Context, occ registry.Occurrence) error { return nil }

// want +2 `"weekdays" fires in the same minute as "morning" and "seconds"`
//
//cron:schedule "15 6 * * MON-FRI" name=weekdays
func Weekdays(ctx context.Context, occ registry.Occurrence) error { return nil }
