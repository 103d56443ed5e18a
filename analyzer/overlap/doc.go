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
// default timeout (30m) applies. Each of overlap=skip, overlap=buffer_one
// and overlap=replace keeps one run at a time, and silences the check:
// skip records a slot that comes due while the previous run is pending or
// running as skipped; buffer_one keeps one such slot waiting and runs it
// when the previous run ends (further ones are skipped); replace cancels
// the previous run and starts the new one. A family (per=) takes skip
// only. The suggested fix adds overlap=skip (or turns overlap=allow into
// it), the one choice that never cancels work nor delays it.
//
// A timeout of two gaps or more means a run may span several slots: the
// report then says to checkpoint the handler's batches, so that a run cut
// off (replaced, timed out, stopped by a deploy) resumes where it stopped
// rather than from the start.
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
// RIGHT: or run the slot that came due once the previous run ends
//
//	//cron:schedule "*/15 * * * *" timeout=20m overlap=buffer_one
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
