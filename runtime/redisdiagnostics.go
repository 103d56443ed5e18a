package runtime

// RedisDiagnostics reports what the Redis engine sees that an operator must
// act on: Redis down or unsafe to fence on, writes a failover lost, two
// services or two processes contending for one name, occurrences on a
// queue no worker serves or served by the wrong service, and clock skew.
// These are the Redis engine's, not the engine-neutral runtime's.
type RedisDiagnostics struct{ rt *Runtime }

// Redis returns the Redis engine's diagnostics.
func (r *Runtime) Redis() *RedisDiagnostics { return &RedisDiagnostics{rt: r} }

// State returns the runtime's view of Redis and, when it is down, the
// last error.
func (rd *RedisDiagnostics) State() (RedisState, error) { return rd.rt.redisState() }

// DuplicateReplica says, when another process heartbeats under this
// replica's Replica name on the same namespace, which it is; "" otherwise.
// Two processes with one name make the admin and the metrics lie about
// who did what.
func (rd *RedisDiagnostics) DuplicateReplica() string { return rd.rt.duplicateReplica() }
