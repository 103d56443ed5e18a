// Package runtime runs a registry's schedules: it enqueues each due
// occurrence into asynq exactly once across all replicas of a service, and
// records what happened in a bounded ledger for the admin page and metrics.
//
//	rt, err := runtime.New(jobs.Registry, runtime.Options{Redis: rdb, Logger: logger})
//	rt.RegisterHandlers(mux) // asynq workers run the handlers, recorded
//	go rt.Run(ctx)           // every replica; only the lease holder enqueues
//
// This package is the Redis/asynq entry point over package runtime/core,
// the engine-neutral core: a [Runtime] is a core.Runtime on the Redis
// engine, with every method of core.Runtime (promoted) and the Redis
// engine's own. A service on another engine imports runtime/core and that
// engine's package instead, and links neither go-redis nor asynq.
//
// The admin page and JSON API (package runtime/admin) and the Prometheus
// collector (package runtime/metrics) are separate packages written against
// core's API, so a service that mounts neither links neither; each takes a
// *Runtime as well as a *core.Runtime (core.Provider).
//
// # The API, in groups
//
// What a service calls: [New] with [Options] (Redis or RedisURL, or
// Engine with [RedisEngine]), [Runtime.RegisterHandlers] to run the
// handlers on asynq's workers (or core.Runtime.Middleware on a mux of its
// own), Run and Close, Observe for events, Health, HealthHandler and
// LivezHandler for probes, with Registry, Namespace, Replica and Logger for
// integrations that sit beside it. [AsynqLogger] keeps asynq's logs in the
// runtime's format.
//
// Operating a schedule: Trigger, Rerun and Backfill run it by hand, Pause,
// Resume and Paused hold it, History reads what it did, and Orphans and
// Forget clear up after a removed one.
//
// Families are behind Families ([Families]: Set, SetMany, Get, List,
// Search, Count, Delete, Pause, Resume, Infos, Next, NextRun, History,
// Trigger, Rerun, Backfill, each taking the family's name first); what a
// dashboard reads behind Monitor ([Monitor]: snapshots, statuses, counters,
// the replicas); this replica's part in scheduling behind Leadership.
//
// Redis diagnostics are behind [Runtime.Redis]: [RedisDiagnostics] (the
// core's Diagnostics, as the Redis engine fills them) says whether Redis
// is up and safe to fence on, what a failover lost, which queues no worker
// serves, what another service's workers took, whether another service or
// process uses this one's names, and the clock skew.
//
// The value and error types (Status, Record, Snapshot, ErrNotLeader, ...)
// are core's, named here too (aliases), so that errors.Is and type
// switches hold across the two packages.
//
// # Engines
//
// The core (planning, families, manual runs, pauses, records, status,
// health and the handover policy) talks to an engine through the
// interfaces of package runtime/engine, whose doc states the contract
// every engine keeps: fenced writes, enqueue-if-absent by occurrence ID,
// bounded reads. Options.Redis (or RedisURL) runs the Redis/asynq engine,
// as does Options.Engine with RedisEngine(client); the sections below
// describe that engine. Its compensations for Redis not being a durable
// database (lost-write epochs, replica acks, start marks, namespace
// probing, INFO checks) run only with it. The core keeps the policies
// that hold on any engine: an enqueue the engine did not make durable is
// in doubt, and if its task is gone when its slot is tried again, the slot
// is recorded lost, not enqueued twice.
//
// # Exactly once
//
// An occurrence's identity is "cron:<namespace>/<name>:<slot unix seconds>"
// (registry.Scope), unique per namespace, so two services sharing a Redis
// and a queue never share an occurrence ID; it is the asynq TaskID. The
// default namespace is named after the registry's package (DefaultNamespace),
// and the handlers refuse another service's occurrence on a shared queue
// (see DefaultNamespace, RedisDiagnostics.NamespaceContention and RegisterHandlers). asynq's enqueue is an atomic check-and-insert on that ID,
// so a second enqueue of the same occurrence is rejected with
// asynq.ErrTaskIDConflict, which the runtime treats as "already enqueued".
// The holder's enqueues and cursor commits are fenced (see below): Redis
// refuses an ex-leader's late enqueue outright, however late it arrives.
// Each enqueue also raises its schedule's cursor to the slot in the same
// script, so a holder that crashed or stalled before committing its
// cursor leaves no enqueued slot after it: the next holder (another
// replica, or the service restarted) starts after the slot instead of
// enqueueing it again. A finished task therefore keeps its ID only for a
// lease TTL (asynq Retention), against a replay of an enqueue whose reply
// was lost; a per-second schedule keeps about twenty finished tasks in
// Redis, not the grace window's worth. With replica acknowledgements
// (Options.ReplicaAcks) it keeps it for grace plus SkewMargin: an enqueue
// no replica acknowledged is retried within grace, and its retry must find
// a task that ran rather than take it for lost.
//
// Exactly once here means enqueued once. asynq delivers at least once (a
// worker that dies mid-task is retried), so a handler keys its effects on
// occ.Key() or occ.Slot. With replica acknowledgements (Options.ReplicaAcks,
// on by default on a Sentinel or cluster client) a failover that loses
// a worker's dequeue does not run the attempt again: the new primary
// delivers it again, and the start mark each worker has a replica
// acknowledge before its handler runs stops that delivery (docs/redis.md
// says what remains).
//
// # Lease and fencing
//
// Every replica runs the scheduler; one at a time holds a lease in Redis
// ("belfry:{<namespace>}:lease", renewed every LeaseTTL/3) and only that one
// enqueues. A holder that crashes is replaced within LeaseTTL; one that
// shuts down hands over at once. A holder trusts its lease only for LeaseTTL
// minus a margin after it last renewed, by its own clock, and every write it
// makes is fenced — its enqueues and its cursor and ledger commits are
// scripts that compare the lease first — refused by Redis if the lease
// moved on, whatever the delay.
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
// missed (Misfire "latest" runs the newest of them instead; "all" runs them,
// oldest first, at most registry.MisfireAllCap of the newest). A schedule with
// Overlap "skip" does not enqueue while its previous occurrence is pending,
// active or retrying; the slot is recorded as skipped. "buffer_one" keeps
// the first such slot waiting (recorded buffered) and enqueues it once the
// previous occurrence ends, recording the others skipped; "replace"
// enqueues the slot and cancels the previous occurrence, recorded
// replaced (docs/overlap.md).
//
// # Families
//
// A schedule declared with per= is a family: its members are data in Redis
// (Families.Set, SetMany, Delete, List), each with its own zone
// and optionally its own expression, and every guarantee above holds per
// (member, slot). The leader keeps one heap entry per (zone, expression)
// bucket, not per member, reads a bucket's members in pages only when it
// is due, and sees member changes within about a second (one GET of a
// change counter per half second). A member's cursor keeps the UTC offset
// of its last slot, so that a zone change never repeats a local time the
// member already ran. See family.go and familyloop.go.
//
// # Removed schedules
//
// A schedule removed from the code (or renamed) leaves its cursor, counters
// and history in Redis. Nothing expires them, so that a schedule removed by
// mistake and restored carries on from its cursor; Orphans lists them (the
// admin page shows them) and Forget removes one.
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
// guarantee.
//
// # Redis Cluster
//
// The runtime runs on Redis Cluster given a cluster client
// (*redis.ClusterClient, or redis.NewUniversalClient with several
// addresses), as asynq's Client, Server and Inspector do. Its own keys
// carry the namespace as their hash tag, so they share one slot; its
// fenced enqueue touches only the queue's slot (asynq's keys carry the
// queue's tag), where a fence key holds the newest term that enqueued
// there. A plain client of a cluster node, or a proxy that is not
// cluster-aware, is refused as a configuration error (ErrRedisCluster).
// See docs/redis-cluster.md.
package runtime
