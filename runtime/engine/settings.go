package engine

import (
	"context"
	"errors"
	"time"
)

// ErrRefused is what a refusal (Settings.Refusal, or a verdict's Unsafe)
// wraps when the server refuses belfry for how it is set up, which no
// retry mends: for Redis, a Redis Cluster. The error it names (the
// innermost that is ErrRefused) says which refusal it is.
var ErrRefused = errors.New("the server refuses belfry as it is set up")

// RefusedAs returns the innermost error in err's chain that is
// ErrRefused (the engine's own sentinel, without the detail wrapped
// around it), or nil.
func RefusedAs(err error) error {
	var found error
	for e := err; e != nil; e = errors.Unwrap(e) {
		if errors.Is(e, ErrRefused) {
			found = e
		}
	}
	return found
}

// Unavailable is what an engine whose server can answer that it cannot
// serve for a moment (a Redis Cluster with a slot without a master, or a
// slot moving between masters) tells the core, so that the log and health
// name that answer as what it is, and not as the server unreachable. The
// core retries it as it retries an outage; it is no refusal (Settings).
// An engine without such answers need not have it.
type Unavailable interface {
	// Unavailable returns what err says of the server, in a few words
	// ("redis cluster unavailable (CLUSTERDOWN)"), when it is such an
	// answer; "" otherwise.
	Unavailable(err error) string
}

// Settings is what an engine whose server can be set up in a way unsafe
// to fence on (a store that evicts keys, a server too old, a topology the
// engine does not support) tells the core, which then does not lead. An
// engine with nothing of the kind need not have it: the core type-asserts
// it and, without it, judges nothing.
type Settings interface {
	// CheckSettings reads the server's settings and its clock in one
	// bounded call; err is the call failing, which says nothing of the
	// settings.
	CheckSettings(ctx context.Context) (SettingsReading, error)
	// Refusal returns, when err is the server refusing what belfry asks of
	// it for how it is set up, which no retry mends, the error saying so;
	// else nil.
	Refusal(err error) error
}

// SettingsReading is what Settings.CheckSettings read.
type SettingsReading struct {
	// Unsafe says why the core must not lead on the server: nil when its
	// settings are safe, or not known.
	Unsafe error
	// Passing, with Unsafe, says the verdict may change any moment (a
	// replica the writes wait for connecting again): the core asks again
	// before its next attempt to lead rather than keep it.
	Passing bool
	// Now is the server's clock, read in the same call.
	Now time.Time
}
