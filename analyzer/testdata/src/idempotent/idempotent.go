package idempotent

import (
	"context"
	"math/rand"
	"time"

	"github.com/belfry/belfry/registry"
)

// Good derives its period from the occurrence.
//
//cron:schedule "17 3 * * *"
func Good(ctx context.Context, occ registry.Occurrence) error {
	day := occ.Slot.Truncate(24 * time.Hour)
	return archive(ctx, day, occ.Key())
}

func archive(ctx context.Context, day time.Time, key string) error { return nil }

//cron:schedule "17 3 * * *"
func Discards(ctx context.Context, _ registry.Occurrence) error { // want `handler Discards discards its occurrence: name it \(occ registry.Occurrence\), derive the period it works on from occ.Slot`
	return nil
}

//cron:schedule "17 3 * * *"
func Unnamed(context.Context, registry.Occurrence) error { // want `handler Unnamed discards its occurrence`
	return nil
}

//cron:schedule "17 3 * * *"
func NeverReads(ctx context.Context, occ registry.Occurrence) error { // want `handler NeverReads never reads its occurrence occ: derive the period it works on from occ.Slot`
	return archive(ctx, occ0(), "")
}

func occ0() time.Time { return time.Time{} }

//cron:schedule "17 3 * * *"
func Direct(ctx context.Context, o registry.Occurrence) error {
	yesterday := time.Now().AddDate(0, 0, -1) // want `handler Direct calls time.Now: a retry after midnight or a manual re-run would work on the wrong period; derive the period from o.Slot`
	return archive(ctx, yesterday, o.Key())
}

func today() time.Time { return time.Now().Truncate(24 * time.Hour) }

func periodStart() time.Time { return today().AddDate(0, 0, -1) }

type reporter struct{}

func (reporter) window() (time.Time, time.Time) { return periodStart(), today() }

//cron:schedule "17 3 * * *"
func ViaHelpers(ctx context.Context, occ registry.Occurrence) error {
	start := periodStart() // want `handler ViaHelpers reads the clock through periodStart → today → time.Now: a retry after midnight`
	var r reporter
	from, _ := r.window() // want `reads the clock through window → periodStart → today → time.Now`
	_ = start
	return archive(ctx, from, occ.Key())
}

// Recursion through helpers terminates.
func even(n int) bool {
	if n == 0 {
		return time.Now().IsZero()
	}
	return odd(n - 1)
}

func odd(n int) bool { return n != 0 && even(n-1) }

//cron:schedule "17 3 * * *"
func Recursive(ctx context.Context, occ registry.Occurrence) error {
	if odd(3) { // want `reads the clock through odd → even → time.Now`
		return nil
	}
	return archive(ctx, occ.Slot, occ.Key())
}

// A clock passed as a value is reported at the reference.
//
//cron:schedule "17 3 * * *"
func ClockValue(ctx context.Context, occ registry.Occurrence) error {
	clock := time.Now // want `handler ClockValue calls time.Now`
	_ = clock
	return archive(ctx, occ.Slot, occ.Key())
}

// Measured only times itself, and says so.
//
//cronlint:ignore idempotent time.Now only measures the duration for the log line
//cron:schedule "17 3 * * *"
func Measured(ctx context.Context, occ registry.Occurrence) error {
	start := time.Now()
	defer func() { _ = time.Since(start) }()
	return archive(ctx, occ.Slot, occ.Key())
}

type Digest struct {
	Since time.Time
	Seed  int64
	Days  int
}

var stable = Digest{Days: 7}

//cron:schedule "0 8 * * MON" payload=stable
func StablePayload(ctx context.Context, occ registry.Occurrence, d Digest) error {
	return archive(ctx, occ.Slot.AddDate(0, 0, -d.Days), occ.Key())
}

var (
	seeded = Digest{
		Since: time.Now(),   // want `payload seeded of handler SeededPayload is built from time.Now: each replica and each restart holds a different value`
		Seed:  rand.Int63(), // want `payload seeded of handler SeededPayload is built from rand.Int63`
	}
	fromHelper = lastWeek() // want `payload fromHelper of handler HelperPayload is built from lastWeek → time.Since`
)

func lastWeek() Digest { return Digest{Days: int(time.Since(time.Time{}).Hours())} }

//cron:schedule "0 8 * * MON" payload=seeded
func SeededPayload(ctx context.Context, occ registry.Occurrence, d Digest) error {
	return archive(ctx, occ.Slot, occ.Key())
}

//cron:schedule "0 9 * * MON" payload=fromHelper
func HelperPayload(ctx context.Context, occ registry.Occurrence, d Digest) error {
	return archive(ctx, occ.Slot, occ.Key())
}

// A handler with the wrong signature is left to the directive check.
//
//cron:schedule "17 3 * * *"
func WrongSignature(ctx context.Context) error {
	_ = time.Now()
	return nil
}
