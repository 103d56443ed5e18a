// Package postgres is belfry's Postgres engine, with River as the queue:
// Engine implements engine.Engine on a *pgxpool.Pool, AddWorkers registers
// every schedule's handler on a *river.Workers, and Migrate creates and
// upgrades belfry's tables (and River's). docs/postgres.md is the guide.
//
//	if _, err := postgres.Migrate(ctx, pool, postgres.MigrateOptions{River: true}); err != nil { ... } // a deploy step
//	eng, err := postgres.New(postgres.Config{Pool: pool})
//	rt, err := core.New(jobs.NewRegistry(deps), core.Options{Engine: eng, Namespace: "billing"})
//	workers := river.NewWorkers()
//	err = postgres.AddWorkers(workers, rt) // kind = schedule name, every attempt recorded
//	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Queues: ..., Workers: workers})
//
// The engine is configured by the runtime it is given to
// (engine.Configurable): namespace, replica name, lease TTL, history
// limits, record TTL, logger, clock and MayLead are core.Options', set
// once. Config holds only what is the engine's own: the pool, the River
// client that inserts jobs, the slot table's retention. One Engine serves
// one runtime; a second core.New given it is refused.
//
// # Carried headers
//
// What the runtime's EnqueueObserver asks to carry with an occurrence is
// stored in its job's metadata (belfry_headers), and AddWorkers' workers
// put it in the handler's context (core.WithCarrier) before any
// middleware runs, where core.Carrier reads it: a trace begun at the
// enqueue continues in the worker.
//
// # Exactly once
//
// EnqueueAll inserts, in one transaction, the slot's row in belfry_slot
// (ON CONFLICT DO NOTHING on namespace, schedule, member, slot; a manual
// run's in belfry_manual, by its occurrence ID), River's job, committed
// only with a row that went in (InsertManyTx in the same transaction;
// kind = the schedule's name, args = the occurrence, metadata belfry_key
// = occ.Key()), and the schedule's cursor. A scheduled slot's job goes in
// first, for a slot with no committed row, so that its row carries the
// job's ID from its insert; a row another transaction took meanwhile
// takes that job out again before the commit. The slot row is the proof:
// two planners that both believe they lead, a zombie's late transaction,
// a replayed call, all conflict on it and insert nothing.
//
// Fencing is checked besides, once, first in each fenced transaction
// (enqueues, cursor, family and record commits): the lease row is read
// FOR SHARE with the fence's term, so a write of an ended term is refused
// whole (engine.ErrNotLeader, the fence Rejected) however late it arrives,
// and a takeover, which updates that row, waits for a write the check let
// through: no write of a term commits after the next term began. Cursors
// only rise, a member's and a bucket's too.
//
// An enqueue of family members' slots holds their family's advisory lock,
// shared with other enqueues, until it commits, and SetMembers takes that
// lock alone before it asks whether a moved member's slot was enqueued
// (its change floor): the answer counts an enqueue under way. Every
// transaction is READ COMMITTED, whatever the database's default, so that
// a statement after such a wait sees what it waited for.
//
// # Clock, queues and planner statistics
//
// Before it leads, and about once a minute after, a replica compares its
// clock with the database's (Engine.CheckSettings): one further off than
// the runtime's SkewMargin does not lead, and its health, status and
// metrics report the skew, as on Redis. The leader reports the queues no
// River client serves (none reported the queue within River's fixed
// ten-minute report interval, or a job waits available with none of the
// queue running) and the occurrences a client bounced for want of their
// worker (Engine.UnservedQueues, Engine.Misrouted).
//
// The lookups of a page of members or of an enqueue's slot rows probe
// their index one key at a time, so no plan (an unanalyzed table's, a
// statement's generic one) turns them into scans of the whole family or
// namespace; and a bulk insert of members analyzes belfry_member, when
// autovacuum may be off or not yet round.
//
// # The lease
//
// One row of belfry_leader per namespace (holder, term, expires_at on the
// database's clock); see election.go. A release keeps the row and its
// term, so terms only rise, and is announced with NOTIFY belfry_leader:
// followers LISTEN on a connection of their own and take over at once
// after a graceful shutdown, and otherwise when the holder's row expires.
//
// # Stalls
//
// Every engine transaction sets idle_in_transaction_session_timeout to the
// lease TTL for itself: a replica cut off between its slot insert and its
// commit would otherwise hold those slot rows locked, and the next
// leader's insert of the same slots would wait, until the server noticed
// the dead connection. It sets statement_timeout to the lease TTL too: a
// fenced write holds the lease row, and a renewal or takeover waits
// behind a stalled one no longer than that. Statements that write many
// rows write them in key order, so that two transactions over the same
// rows wait for each other rather than deadlock.
//
// # What it does not need
//
// Postgres does not lose a committed transaction, and River hands a job to
// one worker at a time by moving it to running in one statement; a job
// still runs again after a failure, after its worker died (rescued as a
// new attempt), or when its worker finished but died before River saved
// that, so a handler's effects are at least once (docs/postgres.md, §4).
// Nothing of that is the engine's to compensate: it implements none of
// engine.Losses, engine.Starts, engine.Settings or engine.Namespaces (the
// namespace is a column of every row). It answers engine.Deliveries from the River job a worker runs.
//
// # Migrations
//
// belfry's tables are created and upgraded by versioned migrations
// embedded in the binary (migrations/NNN_name.sql) and run only by an
// explicit call — Migrate, or the operator's `belfry migrate --postgres
// URL` — never silently at start-up. River's own tables are migrated
// beside them through River's rivermigrate, under the same lock, unless
// the service migrates River itself.
//
// Applied versions are rows of belfry_migration (version, name,
// applied_at). Migrate holds an advisory lock while it works, so two
// migrates at once (two replicas of a deploy job) run one after the other:
// the second finds everything applied and applies nothing. Every pending
// belfry version is applied in one transaction: a failure leaves the schema
// as it was. A database already at a version this belfry does not know (a
// newer belfry migrated it) is refused with ErrSchemaNewer rather than
// run against tables it does not understand; CheckSchema says the same at
// start-up, and names the command to run for a missing or old schema.
//
// belfry's tables, and its own reads and deletes of River's river_job
// (which job a slot has, whether it still runs), name no schema: they are
// found through the pool's search_path, as River finds its tables by
// default. A River client set to another schema (river.Config.Schema)
// needs that schema on the pool's search_path too (search_path=jobs,public
// in the URL, say), or belfry reads another river_job, or none.
//
// # The slot table and its retention
//
// belfry_slot's primary key (namespace, schedule, member, slot) is what
// makes an occurrence run once: a planner inserts the slot's row with
// ON CONFLICT DO NOTHING, and the River job commits in the same
// transaction only when its row went in. A slot is a fixed instant, not "now", so
// planners whose clocks differ compete for the same row.
//
// Retention rule: a row must outlive every window in which its slot can
// be attempted. A slot is attempted while it is due and not older than the
// schedule's grace (for misfire=latest, until the schedule's next slot),
// plus the clock skew a planner may have; a row deleted earlier would let
// a late planner insert the slot again and run it twice. Rows older than
// that window are only history (the ledger, belfry_record, keeps that), so
// retention deletes by slot, not by insertion time, through the
// belfry_slot_retention index. Each row carries its own window, keep_until:
// its slot plus its task's Retention, which the core sizes to the slot's
// grace (and misfire=latest's wait for the next slot) plus SkewMargin; a
// row goes only once both keep_until and Config.SlotRetention have passed,
// so a schedule whose grace exceeds SlotRetention keeps its rows as long
// as it needs. A schedule's (or member's) newest row is never deleted:
// misfire=latest attempts its newest slot until the next one. Manual runs
// (belfry_manual) are keyed by their occurrence ID and kept as long as a
// double submit must stay a no-op. The leader runs Engine.PruneSlots
// about once a minute; every prune deletes in batches, each committed, so
// a backlog is worked off across rounds rather than retried whole.
//
// # Records
//
// A schedule's records are trimmed to its history limit as they are
// written, and a record whose last write is older than the runtime's
// record TTL is deleted by the leader's prune (Engine.PruneRecords, about
// once an hour), as a Redis record expires: a schedule that stopped
// writing records keeps none for ever.
package postgres
