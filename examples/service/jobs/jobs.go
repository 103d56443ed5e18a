// Package jobs is the example service's scheduled work. Each handler works
// on the period its occurrence names (occ.Slot) and keys its effect on
// occ.Key(), so an asynq retry, a second replica or a manual re-run never
// does the work twice or for the wrong period.
//
// The effects go to an in-memory outbox and the log, so the example needs
// nothing but its engine; a real service would write rows keyed the same
// way. PruneSoftDeleted, a checkpointed job, removes real rows from the
// engine's own store (a table on Postgres, a sorted set on Redis). It is a
// method of Jobs, which carries them: main passes the dependencies to
// NewRegistry at start-up.
package jobs

//go:generate go tool crongen

import (
	"sync"
)

// Outbox records each effect once per key, standing in for a table with a
// unique key column (INSERT ... ON CONFLICT (key) DO NOTHING).
type Outbox struct {
	mu      sync.Mutex
	entries map[string]string
}

// Effects is the outbox the handlers write to.
var Effects = &Outbox{entries: map[string]string{}}

// Put records what under key and reports whether it is new; a repeated key
// (a retry whose first attempt got this far) changes nothing.
func (o *Outbox) Put(key, what string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, done := o.entries[key]; done {
		return false
	}
	o.entries[key] = what
	return true
}
