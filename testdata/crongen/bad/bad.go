// Package bad is a crongen fixture: one problem of each kind next to a valid
// schedule, all of which must be reported, and no file written.
package bad

import (
	"context"

	"github.com/belfry/belfry/registry"
)

// Valid would be generated if nothing else were wrong.
//
//cron:schedule "0 3 * * *" name=nightly
func Valid(ctx context.Context, occ registry.Occurrence) error { return nil }

// BadExpr has a minute out of range.
//
//cron:schedule "61 * * * *"
func BadExpr(ctx context.Context, occ registry.Occurrence) error { return nil }

// UnknownKey has a typo in a key.
//
//cron:schedule "0 4 * * *" tmeout=5m
func UnknownKey(ctx context.Context, occ registry.Occurrence) error { return nil }

// BadZone names no zone.
//
//cron:schedule "0 5 * * *" tz=Mars/Olympus
func BadZone(ctx context.Context, occ registry.Occurrence) error { return nil }

// WrongSignature forgets the occurrence.
//
//cron:schedule "0 6 * * *"
func WrongSignature(ctx context.Context) error { return nil }

// MissingPayload names a variable that does not exist.
//
//cron:schedule "0 7 * * *" payload=nope
func MissingPayload(ctx context.Context, occ registry.Occurrence, n int) error { return nil }

// Misplaced is a variable, not a func.
//
//cron:schedule "0 8 * * *"
var Misplaced = 1

type worker[T any] struct{}

// Run is a method of a generic type, which generated code cannot bind.
//
//cron:schedule "0 9 * * *"
func (worker[T]) Run(ctx context.Context, occ registry.Occurrence) error { return nil }

// Spaced has a space after the slashes: Go ignores the line, and the
// schedule would silently not exist.
//
// cron:schedule "0 10 * * *"
func Spaced(ctx context.Context, occ registry.Occurrence) error { return nil }

// Many has several problems, all reported in one run.
//
//cron:schedule "0 11 * * *" timout=5m queue= retry=lots
func Many(ctx context.Context, occ registry.Occurrence) error { return nil }
