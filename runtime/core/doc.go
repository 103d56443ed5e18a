// Package core is belfry's engine-neutral runtime: it plans a registry's
// schedules, enqueues each due occurrence exactly once across all replicas
// of a service through an engine (package runtime/engine), and records
// what happened for the admin page and metrics. It links no engine's
// driver: a service names its engine in Options.Engine and links only
// that one.
//
//	rt, err := core.New(jobs.Registry, core.Options{Engine: eng, Logger: logger})
//	// workers of eng's queue run the handlers through rt.Middleware()
//	go rt.Run(ctx) // every replica; only the lease holder enqueues
//
// A Redis service uses package runtime instead, which is this package on
// the Redis/asynq engine (runtime.New, runtime.Options{Redis: rdb}) with
// asynq's worker wiring; runtime.RedisEngine(rdb) is that engine for
// Options.Engine here, refused as runtime.New refuses its client, with the
// replica acks its client gets by default (one replica on a Sentinel or
// cluster client; runtime.Options.ReplicaAcks chooses otherwise). New configures only
// Options.Engine itself (engine.Configurable), so it refuses an engine
// that holds a Configurable inside it rather than run it unconfigured.
//
// # The API, in groups
//
// What a service calls is on [Runtime]: [New] with [Options], [Runtime.Run],
// [Runtime.Close], [Runtime.Middleware] for the engine's workers (with
// [WithCarrier] for what travels with a task), [Runtime.Observe] for
// events, and [Runtime.Health], [Runtime.HealthHandler] and
// [Runtime.LivezHandler] for probes, with [Runtime.Registry],
// [Runtime.Namespace], [Runtime.Replica] and [Runtime.Logger] for
// integrations that sit beside it.
//
// Operating a schedule is on [Runtime] too: [Runtime.Trigger],
// [Runtime.Rerun] and [Runtime.Backfill] run it by hand, [Runtime.Pause],
// [Runtime.Resume] and [Runtime.Paused] hold it, [Runtime.History] reads
// what it did, and [Runtime.Orphans] and [Runtime.Forget] clear up after
// a removed one.
//
// Families are behind [Runtime.Families]: [Families] writes, lists and
// pauses a family's members and runs one by hand, each method taking the
// family's name first (Set, SetMany, Get, List, Search, Count, Delete,
// Pause, Resume, Infos, Next, NextRun, History, Trigger, Rerun, Backfill).
//
// What a dashboard reads is behind [Runtime.Monitor]: [Monitor] has the
// snapshots the admin page shows ([Monitor.Snapshot], [Monitor.SnapshotOf]),
// every schedule's status ([Monitor.Statuses]), counters and last times for
// metrics, the replicas ([Monitor.Cluster]) and the settings that explain
// them. This replica's part in scheduling is behind [Runtime.Leadership]:
// whether it leads, why its scheduler is disabled, and how late its
// enqueues ran. What the engine sees that an operator must act on is
// behind [Runtime.Diagnostics]: [Diagnostics], filled by what the engine
// offers of package engine's optional interfaces (Settings, Losses,
// Namespaces, Queues).
//
// Packages written against this one (runtime/admin, runtime/metrics) take
// a [Provider], which a *Runtime is and runtime.Runtime embeds.
//
// # Engines
//
// The core talks to its engine only through package engine: election,
// fenced enqueue-if-absent with the cursor commit, records, pauses,
// members, counters, task state and health, and the optional interfaces
// it type-asserts. An engine that implements engine.Configurable is
// configured by New (namespace, replica, lease TTL, history limits,
// record TTL, logger, clock, and MayLead, the core's refusal to lead in a
// namespace another service owns). The core keeps the policies that hold
// on any engine: an enqueue the engine did not make durable is in doubt,
// and if its task is gone when its slot is tried again, the slot is
// recorded lost, not enqueued twice (unacked.go). docs/engines.md says how
// an engine plugs in, and runtime/enginetest is the suite it passes.
package core
