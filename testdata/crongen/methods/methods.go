// Package methods is a crongen fixture: handlers that are methods of types
// holding the service's dependencies (pointer and value receivers, one
// with a payload), next to a plain func, and a receiver type whose natural
// parameter name a package-level declaration already takes.
package methods

import (
	"context"
	"fmt"

	"github.com/belfry/belfry/registry"
)

// Store stands in for a database pool.
type Store struct{ Name string }

// Jobs holds what the handlers need.
type Jobs struct {
	DB *Store
}

// Prune deletes what the occurrence's day made obsolete.
//
//cron:schedule "17 3 * * *" name=maintenance:prune queue=maintenance
func (j *Jobs) Prune(ctx context.Context, occ registry.Occurrence) error {
	fmt.Println("prune", j.DB.Name, occ.Key())
	return nil
}

// Limits is a payload of the package's own type.
type Limits struct{ Max int }

var limits = Limits{Max: 10}

// Vacuum has a pointer receiver and a payload.
//
//cron:schedule "0 4 * * SUN" payload=limits
func (j *Jobs) Vacuum(ctx context.Context, occ registry.Occurrence, l Limits) error {
	fmt.Println("vacuum", j.DB.Name, l.Max, occ.Key())
	return nil
}

// Count has a value receiver on a type whose other handlers have pointer
// receivers: NewRegistry takes *Jobs, through which the value method binds.
//
//cron:schedule "0 5 * * *"
func (j Jobs) Count(ctx context.Context, occ registry.Occurrence) error {
	fmt.Println("count", j.DB.Name, occ.Key())
	return nil
}

// Mailer has value receivers only, so NewRegistry takes it by value.
type Mailer struct{ From string }

// Digest mails the weekly digest.
//
//cron:schedule "0 8 * * MON" name=reports:weekly tz=Europe/Berlin
func (m Mailer) Digest(ctx context.Context, occ registry.Occurrence) error {
	fmt.Println("digest from", m.From, occ.Key())
	return nil
}

// mailer is a package-level name the Mailer parameter must not shadow.
var mailer = "unused"

// Heartbeat is a plain func in a package with method handlers.
//
//cron:schedule "@every 90s" name=heartbeat
func Heartbeat(ctx context.Context, occ registry.Occurrence) error {
	fmt.Println("heartbeat", occ.Key(), mailer)
	return nil
}
