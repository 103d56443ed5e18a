// Package directive defines an Analyzer that checks //cron:schedule
// directives: their grammar, placement, names and handler signature.
//
// # Analyzer directive
//
// directive: check //cron:schedule directives
//
// Reports what would make crongen fail or silently drop a schedule, each
// at the offending text, with the same messages crongen prints, because
// both take them from the registry package:
//
//   - a malformed //cron: line: unknown directive, bad or missing cron
//     expression, unknown, duplicate or empty key, bad value, unknown zone;
//   - a CRON_TZ= or TZ= prefix in the expression (fix: move it to tz=);
//   - "// cron:schedule" with a space, which Go does not treat as a
//     directive, so the schedule would not exist (fix: remove the space);
//   - a directive where registry accepts no handler;
//   - a handler whose signature is not
//     func(context.Context, registry.Occurrence) error, or with payload=V
//     the same with a third parameter that V's type is assignable to, V
//     being a package-level variable (the suggestion for a missing V uses
//     the handler's own third parameter type);
//   - two schedules of the package with the same name, at the second,
//     naming the position of the first (names must be unique across the
//     registry; crongen and the runtime check across packages);
//   - a //cronlint:ignore comment without a check name and a reason,
//     naming an unknown check, or next to no directive.
//
// WRONG: Go ignores a directive with a space, and the job never runs
//
//	// cron:schedule "17 3 * * *" name=prune
//	func Prune(ctx context.Context, occ registry.Occurrence) error
//
// RIGHT:
//
//	//cron:schedule "17 3 * * *" name=prune
//	func Prune(ctx context.Context, occ registry.Occurrence) error
//
// WRONG: the zone inside the expression
//
//	//cron:schedule "CRON_TZ=Europe/Paris 0 19 * * MON-FRI"
//
// RIGHT:
//
//	//cron:schedule "0 19 * * MON-FRI" tz=Europe/Paris
package directive
