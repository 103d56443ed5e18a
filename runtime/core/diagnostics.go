package core

// Diagnostics report what the engine sees that an operator must act on:
// the engine down or unsafe to fence on, writes a failover lost, two
// services or two processes contending for one name, occurrences on a
// queue no worker serves or served by the wrong service, and clock skew.
// Each says nothing (zero) when the engine does not tell it.
type Diagnostics struct{ rt *Runtime }

// Diagnostics returns the engine's diagnostics.
func (r *Runtime) Diagnostics() *Diagnostics { return &Diagnostics{rt: r} }

// State returns the runtime's view of the engine's store and, when it is
// down, the last error.
func (d *Diagnostics) State() (RedisState, error) { return d.rt.redisState() }

// DuplicateReplica says, when another process heartbeats under this
// replica's Replica name on the same namespace, which it is; "" otherwise.
// Two processes with one name make the admin and the metrics lie about
// who did what.
func (d *Diagnostics) DuplicateReplica() string { return d.rt.duplicateReplica() }
