package postgres

import (
	"context"

	"github.com/belfry/belfry/runtime/engine"
)

var _ engine.Settings = (*Engine)(nil)

// CheckSettings reads the database's clock, bounded by the election's
// call timeout, for the core to compare with this replica's: a replica
// whose clock is further from Postgres's than SkewMargin does not lead,
// and its health and status report the skew. Nothing in Postgres's own
// settings makes fencing on it unsafe.
func (e *Engine) CheckSettings(ctx context.Context) (engine.SettingsReading, error) {
	ctx, cancel := context.WithTimeout(ctx, e.callTimeout())
	defer cancel()
	now, err := engine.Obey(ctx, e.Time)
	if err != nil {
		return engine.SettingsReading{}, err
	}
	return engine.SettingsReading{Now: now}, nil
}

// Refusal is nil: Postgres refuses nothing for how it is set up.
func (e *Engine) Refusal(error) error { return nil }
