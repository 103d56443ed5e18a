// Package idempotent defines an Analyzer that reports scheduled handlers
// which cannot be re-run safely.
//
// # Analyzer idempotent
//
// idempotent: report handlers that cannot be re-run safely
//
// An occurrence may run more than once: asynq retries it, an operator
// re-runs a failed night, and a retry may start after midnight. A handler
// is safe only when it works on the period its occurrence names
// (occ.Slot) and makes its effects happen once (occ.Key()). Reported:
//
//   - a handler that discards its occurrence (an unnamed or _ parameter)
//     or never reads it;
//   - a clock read in a handler: time.Now, time.Since, time.Until,
//     time.After, time.Tick, time.NewTimer or time.NewTicker, called
//     directly or through functions and methods of the same module, in
//     this package or another one, reported at the call in the handler
//     with the chain of calls. A retry after midnight or a re-run next
//     week would work on the wrong period; a wait belongs on ctx, which
//     carries the run's deadline;
//   - a payload= variable initialised from time.Now, math/rand,
//     crypto/rand, uuid or the host (os.Hostname, os.Getpid): each replica
//     and each restart holds a different value, so a retry elsewhere sees
//     other input.
//
// Handlers may be top-level functions or methods; what counts as a handler
// is decided by the registry package, as crongen decides it. Calls through
// interfaces and function values are not followed.
//
// WRONG: yesterday is whenever the run happens
//
//	//cron:schedule "17 3 * * *"
//	func Rollup(ctx context.Context, occ registry.Occurrence) error {
//		day := time.Now().AddDate(0, 0, -1)
//		return store.Rollup(ctx, day)
//	}
//
// RIGHT: the day before the slot, written once per occurrence
//
//	//cron:schedule "17 3 * * *"
//	func Rollup(ctx context.Context, occ registry.Occurrence) error {
//		day := occ.Slot.AddDate(0, 0, -1)
//		return store.RollupOnce(ctx, occ.Key(), day)
//	}
//
// A clock read that does not choose the period (a duration for a log
// line) says so with //cronlint:ignore idempotent <reason>.
package idempotent
