// Package overlap defines an Analyzer that reports schedules whose runs
// may overlap.
//
// # Analyzer overlap
//
// overlap: report a timeout longer than the gap between two occurrences
//
// When a run may take longer than the shortest gap between two
// consecutive occurrences, the next occurrence starts while the previous
// one still runs, and two copies of the job work on the same data at once.
//
// The gap is measured on the schedule's own fire times over the sample
// year (366 days from 2026-01-01T00:00:00Z, whatever the day cronlint
// runs), so daylight-saving transitions count: "30 1,2 * * *" in
// America/New_York is 30 minutes apart on the spring-forward day. The
// walk is bounded: every matching day has the same times of day, so after
// one whole day only the days next to a transition are walked in full.
//
// The report is at the timeout= key, or at the expression when the
// default timeout (30m) applies. The suggested fix adds overlap=skip
// (or turns overlap=allow into it): a slot that comes due while the
// previous run is pending or running is then recorded as skipped.
//
// WRONG: a 20-minute job every quarter hour
//
//	//cron:schedule "*/15 * * * *" timeout=20m
//	func SyncInventory(ctx context.Context, occ registry.Occurrence) error
//
// RIGHT: skip a slot while the previous run is still going
//
//	//cron:schedule "*/15 * * * *" timeout=20m overlap=skip
//	func SyncInventory(ctx context.Context, occ registry.Occurrence) error
//
// RIGHT: or keep the run shorter than the gap
//
//	//cron:schedule "*/15 * * * *" timeout=10m
//	func SyncInventory(ctx context.Context, occ registry.Occurrence) error
//
// A handler that makes concurrent runs safe on its own (a row lock it
// gives up at once when held) says so with
// //cronlint:ignore overlap <reason>.
package overlap
