package bad

import (
	"context"

	"github.com/belfry/belfry/registry"
)

// AlsoNightly reuses the name of Valid in bad.go.
//
//cron:schedule "0 2 * * *" name=nightly
func AlsoNightly(ctx context.Context, occ registry.Occurrence) error { return nil }

// Prüfen gets a default name with a letter task names do not allow.
//
//cron:schedule "0 1 * * *"
func Prüfen(ctx context.Context, occ registry.Occurrence) error { return nil }
