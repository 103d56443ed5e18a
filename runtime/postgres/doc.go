// Package postgres holds the Postgres engine's schema: belfry's tables,
// created and upgraded by versioned migrations embedded in the binary
// (migrations/NNN_name.sql) and run only by an explicit call — Migrate, or
// the operator's `belfry migrate --postgres URL` — never silently at
// start-up. River's own tables are migrated beside them through River's
// rivermigrate, under the same lock, unless the service migrates River
// itself.
//
// # Migrations
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
// # The slot table and its retention
//
// belfry_slot's primary key (namespace, schedule, member, slot) is what
// makes an occurrence run once: a planner inserts the slot's row with
// ON CONFLICT DO NOTHING and inserts the River job in the same transaction
// only when its row went in. A slot is a fixed instant, not "now", so
// planners whose clocks differ compete for the same row.
//
// Retention rule: a row must outlive every window in which its slot can
// be attempted. A slot is attempted while it is due and not older than the
// schedule's grace (for misfire=latest, until the schedule's next slot),
// plus the clock skew a planner may have; a row deleted earlier would let
// a late planner insert the slot again and run it twice. Rows older than
// that window are only history (the ledger, belfry_record, keeps that), so
// retention deletes by slot, not by insertion time, through the
// belfry_slot_retention index. Manual runs (belfry_manual) are keyed by
// their occurrence ID and kept as long as a double submit must stay a
// no-op.
package postgres
