// Package engine is the contract between belfry's core (planning, change
// floors, families, manual runs, pauses, records, status, health and the
// handover policy) and an engine that stores its state, queues its tasks
// and elects its leader: today Redis with asynq, next Postgres with River.
// The core speaks only of this package's interfaces and value types, so
// an engine plugs in without copying the core. This package imports no
// driver, nor does the core (package runtime/core): a service links only
// the engine it names in core.Options.Engine. Package runtime is the core
// on the Redis engine; a service on another engine does not import it.
//
// An engine that takes its settings from the runtime it serves implements
// Configurable: core.New calls Configure with the runtime's namespace,
// replica, lease TTL, history limits, logger, clock and MayLead.
//
// The interfaces are young: they may change, in this repository, until a
// second engine implements them. An engine written elsewhere should pin
// belfry's version.
//
// # The contract every engine keeps
//
// Fencing. One replica at a time leads, for a term (Election). Every
// write the leader makes for a term (enqueues under a Fence, InitCursors,
// Commit, CommitFamily) is refused with ErrNotLeader, or for an enqueue a
// Rejected fence, once another term has begun, however late the write
// reaches the engine: a stalled ex-leader can never enqueue a slot twice.
// The check is the engine's, in the same atomic write, not a read before
// it.
//
// Enqueue-if-absent. A task is keyed by its ID: the occurrence ID of
// registry.Scope (the scheduled slot's, whose occ.Key() a handler keys its
// effects on) or a manual run's own. Inserting an ID that is already in is
// success with nothing inserted, for as long as the task's Retention, so
// a replayed or repeated enqueue inserts once. The schedule's cursor rises
// with the task (Enqueue.Cursor) in one atomic write: a leader that dies
// between its enqueue and its commit leaves no task that the cursor does
// not cover, and the next leader starts after it.
//
// Bounded reads. The reads a page, health probe or metrics scrape makes
// cost what they are asked for (the names asked, what is paused, failing
// or running), not the number of schedules declared, and no single call
// holds the engine for long: large reads go in pages. A read returns by
// its caller's context deadline whatever its driver honours (see Obey).
//
// Durability. Acknowledged returns once what was written is durable, or
// ErrNotAcked; a write that returned ErrNotAcked may still be there, and
// a retry finds it (an ID conflict), not a second copy.
//
// The conformance suite in package runtime/enginetest holds every engine
// to this contract.
package engine
