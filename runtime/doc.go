// Package runtime runs a registry's schedules: it enqueues each due
// occurrence into asynq exactly once across all replicas of a service, and
// records what happened in a bounded ledger for the admin page and metrics.
//
//	rt, err := runtime.New(jobs.Registry, runtime.Options{Redis: rdb, Logger: logger})
//	rt.RegisterHandlers(mux) // asynq workers run the handlers, recorded
//	go rt.Run(ctx)           // every replica; only the lease holder enqueues
//
// # Exactly once
//
// An occurrence's identity is "cron:<name>:<slot unix seconds>", and it is
// the asynq TaskID. asynq's enqueue is an atomic check-and-insert on that ID,
// so a second enqueue of the same occurrence (a zombie leader, clock skew, a
// retry after a timeout) is rejected with asynq.ErrTaskIDConflict, which the
// runtime treats as "already enqueued". A finished task keeps its ID
// reserved for grace plus SkewMargin (asynq Retention): the longest time in
// which any replica could attempt that slot again. Longer would only fill
// Redis.
//
// Exactly once here means enqueued once. asynq delivers at least once (a
// worker that dies mid-task is retried), so a handler keys its effects on
// occ.Key() or occ.Slot.
//
// # Lease
//
// One key, "<namespace>:lease", holds "<replica>|<token>" where the token
// comes from INCR on "<namespace>:lease:token", so every tenure has a
// fencing token larger than any before it. A replica is in one of two
// states:
//
//   - Follower: it tries SET NX PX (a script that also records its
//     heartbeat). When the key exists the script returns its remaining life,
//     and the follower tries again the moment it expires, not on a blind poll;
//     a holder that shuts down publishes on "<namespace>:lease:released" so
//     followers try at once.
//   - Holder: it renews every TTL/3 with compare-and-PEXPIRE. It trusts its
//     lease only until the moment it *sent* its last successful renewal plus
//     TTL minus a margin (TTL/10), measured on its own monotonic clock, so the
//     trust window ends before the key can expire in Redis whatever the
//     network delay. It steps down the moment a renewal fails or is refused,
//     or when the trust window lapses (a paused process).
//
// A holder that stepped down after a transient error resumes its lease if
// the key still holds its exact value (nobody took over meanwhile). On
// graceful shutdown the holder deletes its key with compare-and-DEL and
// publishes the release.
//
// # Fencing
//
// Checking the lease and then writing is a race: a holder paused between
// the two (GC, SIGSTOP, a VM migration) wakes up believing it leads. So every
// write the holder makes to scheduler state (cursors, ledger of scheduled
// slots) runs in a Lua script that first checks the lease value, and a
// rejected write makes the replica step down. The enqueue itself goes
// through asynq's own script and cannot be fenced; it does not need to be,
// because the task ID makes it idempotent.
//
// # Scheduling
//
// Every replica runs the scheduling loop; only the holder acts. On gaining
// the lease it reads every schedule's cursor (the last slot handled) in one
// round trip and builds a heap of next slots; then it sleeps until the
// earliest slot. When slots come due it enqueues them (concurrently across
// schedules, the enqueues made at the same moment sharing pipelines) and
// then advances their cursors in one fenced script per batch.
// A crash between the two is repaired by the next holder, which enqueues the
// same IDs again and is told they exist. The loop's work grows with the
// schedules due, not with the total.
//
// A schedule seen for the first time starts from now: the slot that passed
// just before it was deployed does not run. There is no backfill: a slot
// older than its grace window when the holder gets to it is recorded as
// missed (Misfire "latest" runs the newest of them instead). A schedule with
// Overlap "skip" does not enqueue while its previous occurrence is pending,
// active or retrying; the slot is recorded as skipped.
//
// # Without Redis
//
// With no Redis configured the runtime logs once that scheduling is
// disabled, and still answers questions about schedules; it never fails the
// host. With Redis configured but unreachable it retries with capped
// backoff, logs each change of state once, and resumes by itself.
//
// # Limits
//
// A Redis failover that loses acknowledged writes (asynchronous
// replication) can lose a lease, a cursor or a task, and with them the
// guarantee. asynq's scripts are not Redis Cluster-safe, and neither are
// these.
package runtime
