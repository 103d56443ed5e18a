// Package stale defines an Analyzer that reports a generated registry
// (zz_generated.cron.go) that no longer matches the package's directives.
//
// # Analyzer stale
//
// stale: report a zz_generated.cron.go that no longer matches its directives
//
// The service runs what zz_generated.cron.go holds, not what the
// directives say. A directive changed without go generate compiles, and
// the service keeps the old schedule: "*/2 * * * *" edited to
// "*/5 * * * *" still fires every two minutes. stale reads the generated
// file of the package (the one file the other checks skip because it is
// generated) and compares each registry.Schedule in it with the directive
// of the same name, and each directive with its entry. It reports, each
// time with "run go generate":
//
//   - an expression, or a key that shapes the entry (tz, queue, timeout,
//     retry, grace, overlap, misfire, phase, per, payload), that differs
//     from the entry: at the expression or the key's value, or at the
//     directive when the key was removed and its default now applies;
//   - a handler that differs: at the function the directive is on;
//   - a schedule renamed with name=: at the name, when the entry of the
//     same handler has the old one;
//   - a directive with no entry: at the directive;
//   - an entry with no directive: at the entry's name in the generated
//     file (not when some directive of the package is invalid, which the
//     directive check reports and which crongen refuses to generate);
//   - a package with directives and no zz_generated.cron.go: at its
//     first directive.
//
// The source line an entry records (Source: "prune.go:24") is not
// compared: editing a comment above a directive changes nothing the
// service runs. make verify/generate, which regenerates and diffs, still
// catches it. Directives in _test.go files are not compared: crongen does
// not generate them.
//
// WRONG: the directive changed, the generated file did not
//
//	//cron:schedule "*/5 * * * *" name=tick
//	func Tick(ctx context.Context, occ registry.Occurrence) error
//
//	// zz_generated.cron.go
//	registry.Schedule{Name: TaskTick, Expr: "*/2 * * * *", ...}
//
// RIGHT: regenerate and commit both
//
//	go generate ./...
//
// In CI, go vet -vettool=$(go tool -n cronlint) ./... then fails on a
// forgotten go generate.
package stale
