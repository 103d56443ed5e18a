package dirty

import (
	"context"
	"time"

	"github.com/belfry/belfry/registry"

	"example.com/svc/clock"
)

// cron:schedule "5 4 * * *" name=spaced
func Spaced(ctx context.Context, occ registry.Occurrence) error { return nil }

//cron:schedule "0 3 * * *" name=bad-key colour=red
func BadKey(ctx context.Context, occ registry.Occurrence) error { return nil }

//cron:schedule "0 0 * * *" name=midnight-a
func MidnightA(ctx context.Context, occ registry.Occurrence) error { return use(occ) }

//cron:schedule "@daily" name=midnight-b
func MidnightB(ctx context.Context, occ registry.Occurrence) error { return use(occ) }

//cron:schedule "0 0 * * *" name=midnight-c tz=Europe/London
func MidnightC(ctx context.Context, occ registry.Occurrence) error { return use(occ) }

//cron:schedule "30 1 * * *" name=dst tz=America/New_York
func DST(ctx context.Context, occ registry.Occurrence) error { return use(occ) }

//cron:schedule "17 5 * * *" name=stale
func Stale(ctx context.Context, occ registry.Occurrence) error {
	_ = time.Now().AddDate(0, 0, -1)
	return use(occ)
}

//cron:schedule "*/10 * * * *" name=slow timeout=15m
func Slow(ctx context.Context, _ registry.Occurrence) error { return nil }

//cronlint:ignore overlap the handler holds a lock and returns at once when it is taken
//cron:schedule "*/10 * * * *" name=locked timeout=15m
func Locked(ctx context.Context, occ registry.Occurrence) error { return use(occ) }

// Cleanup meets the midnight jobs once a day; it stays on the hour, and
// cronlint -fix leaves it alone.
//
//cron:schedule "@hourly" name=cleanup
func Cleanup(ctx context.Context, occ registry.Occurrence) error { return use(occ) }

//cron:schedule "23 6 * * *" name=via-helper
func ViaHelper(ctx context.Context, occ registry.Occurrence) error {
	_ = clock.Yesterday()
	return use(occ)
}

func use(occ registry.Occurrence) error { _ = occ.Key(); return nil }
