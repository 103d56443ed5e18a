package directive

import (
	"context"

	"github.com/belfry/belfry/registry"
)

// Prune is well formed.
//
//cron:schedule "17 3 * * *" name=prune tz=UTC timeout=20m
func Prune(ctx context.Context, occ registry.Occurrence) error { return nil }

// Spaced is not a schedule at all: Go ignores "// cron:".
//
// want +1 `"// cron:" has a space after //, so Go does not treat it as a directive`
// cron:schedule "0 4 * * *"
func Spaced(ctx context.Context, occ registry.Occurrence) error { return nil }

// Prose that merely mentions cron is left alone.
// cron: runs nightly, see the runbook.
func Prose() {}

// want +2 `unknown directive "//cron:schedul"; the only one is //cron:schedule`
//
//cron:schedul "0 5 * * *"
func Typo(ctx context.Context, occ registry.Occurrence) error { return nil }

// want +2 `bad cron expression "61 3 \* \* \*": minute field "61"`
//
//cron:schedule "61 3 * * *"
func BadMinute(ctx context.Context, occ registry.Occurrence) error { return nil }

// want +2 `unknown key "colour"; keys are grace, misfire`
//
//cron:schedule "0 3 * * *" colour=red
func UnknownKey(ctx context.Context, occ registry.Occurrence) error { return nil }

// want +2 `bad value "Mars/Olympus" for tz: unknown zone`
//
//cron:schedule "0 3 * * *" tz=Mars/Olympus
func BadZone(ctx context.Context, occ registry.Occurrence) error { return nil }

// want +2 `key timeout is given twice`
//
//cron:schedule "0 3 * * *" timeout=1m timeout=2m
func TwiceTimeout(ctx context.Context, occ registry.Occurrence) error { return nil }

// want +2 `zone prefix CRON_TZ=Europe/London is not supported in the expression; use the key tz=Europe/London`
//
//cron:schedule "CRON_TZ=Europe/London 0 3 * * *" queue=reports
func Prefixed(ctx context.Context, occ registry.Occurrence) error { return nil }

// A prefix next to a tz= key is not moved: which zone was meant is a
// decision, not an edit.
//
// want +2 `zone prefix TZ=Asia/Tokyo is not supported`
//
//cron:schedule "TZ=Asia/Tokyo 0 3 * * *" tz=UTC
func PrefixedAndKeyed(ctx context.Context, occ registry.Occurrence) error { return nil }

// want +2 `must be in the doc comment of a top-level func;`
//
//cron:schedule "0 3 * * *"
var notAFunc = 1

type job struct{}

// want +2 `must be in the doc comment of a top-level func, not a method`
//
//cron:schedule "0 3 * * *"
func (job) Run(ctx context.Context, occ registry.Occurrence) error { return nil }

func inBody() {
	// want +1 `must be in the doc comment of a top-level func`
	//cron:schedule "0 3 * * *"
}

//cron:schedule "0 6 * * *"
func NoOccurrence(ctx context.Context) error { // want `handler NoOccurrence has signature func\(ctx context.Context\) error; it takes 1 parameters`
	return nil
}

//cron:schedule "0 6 * * *"
func NoError(ctx context.Context, occ registry.Occurrence) { // want `it must return exactly one error`
}

type Config struct{ Days int }

var retention = Config{Days: 30}

//cron:schedule "0 7 * * *" payload=retention
func WithPayload(ctx context.Context, occ registry.Occurrence, cfg Config) error { return nil }

// want +2 `payload=missing names no package-level variable of package directive`
//
//cron:schedule "0 7 * * *" payload=missing
func MissingPayload(ctx context.Context, occ registry.Occurrence, cfg Config) error { return nil }

//cron:schedule "0 7 * * *" payload=retention
func WrongPayload(ctx context.Context, occ registry.Occurrence, days int) error { return nil } // want `the payload of type directive.Config is not assignable to the third parameter`

//cron:schedule "0 7 * * *"
func PayloadWithoutKey(ctx context.Context, occ registry.Occurrence, cfg Config) error { return nil } // want `a third parameter needs payload=<package-level var>`
