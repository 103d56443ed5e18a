package pairs

import (
	"context"

	"github.com/belfry/belfry/registry"
)

// want +2 `"two-a" fires in the same minute as "two-b" \(02:30 UTC; first on 2026-01-01, 366 times in the sample year\); spread the load: "18 2 \* \* \*"`
//
//cron:schedule "30 2 * * *" name=two-a
func TwoA(ctx context.Context, occ registry.Occurrence) error { return nil }

// want +2 `"two-b" fires in the same minute as "two-a" .*"43 2 \* \* \*"`
//
//cron:schedule "30 2 * * *" name=two-b
func TwoB(ctx context.Context, occ registry.Occurrence) error { return nil }

// @every 6h fires at 00:00, 06:00, 12:00 and 18:00 UTC.
//
// want +2 `"every" fires in the same minute as "noon" \(12:00 UTC, the top of the hour, .*\); move some of them to other minutes`
//
//cron:schedule "@every 6h" name=every
func Every(ctx context.Context, occ registry.Occurrence) error { return nil }

// want +2 `"noon" fires in the same minute as "every" .*"56 12 \* \* \*"`
//
//cron:schedule "0 12 * * *" name=noon
func Noon(ctx context.Context, occ registry.Occurrence) error { return nil }
