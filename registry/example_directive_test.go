package registry_test

import (
	"context"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"time"

	"github.com/belfry/belfry/registry"
)

// A directive is parsed from the comment of a Go file; positions come from
// the file set, so errors print as file:line:col.
func ExampleParseDirective() {
	src := `package jobs

//cron:schedule "30 2 * * *" name=reports:nightly tz=America/New_York timeout=20m
func Nightly() {}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "jobs.go", src, parser.ParseComments)
	if err != nil {
		panic(err)
	}
	d, err := registry.ParseDirective(f.Comments[0].List[0])
	if err != nil {
		panic(err)
	}
	fmt.Println(d.Name, d.Zone, d.Timeout, d.Queue)
	from := time.Date(2026, 3, 7, 12, 0, 0, 0, time.UTC)
	fmt.Println(d.Cron.Next(from).Format(time.RFC3339)) // 02:30 does not exist that night
	// Output:
	// reports:nightly America/New_York 20m0s default
	// 2026-03-08T03:00:00-04:00
}

// Every problem of a directive is reported at once, each at its position.
func ExampleParseDirective_errors() {
	src := `package jobs

//cron:schedule "0 25 * * *" timout=20m retry=lots
func Nightly() {}
`
	fset := token.NewFileSet()
	f, _ := parser.ParseFile(fset, "jobs.go", src, parser.ParseComments)
	_, err := registry.ParseDirective(f.Comments[0].List[0])
	var errs registry.PosErrors
	if errors.As(err, &errs) {
		for _, e := range errs {
			pos := fset.Position(e.Pos)
			fmt.Printf("%s:%d:%d: %.60s\n", pos.Filename, pos.Line, pos.Column, e.Msg)
		}
	}
	// Output:
	// jobs.go:3:20: bad cron expression "0 25 * * *": hour field "25": 25 is abo
	// jobs.go:3:30: unknown key "timout" (did you mean timeout?); keys are grace
	// jobs.go:3:47: bad value "lots" for retry: want a whole number of retries f
}

// A service whose jobs live in several packages runs them in one runtime
// by merging the packages' registries; a name declared in two of them is
// refused.
func ExampleMerge() {
	nop := func(context.Context, registry.Occurrence) error { return nil }
	jobs := registry.MustNew(registry.Schedule{Name: "maintenance:prune", Expr: "17 3 * * *", Handler: nop, Source: "prune.go:12"})
	billing := registry.MustNew(registry.Schedule{Name: "billing:invoice", Expr: "0 2 1 * *", Handler: nop, Source: "invoice.go:9"})
	reg, err := registry.Merge(jobs, billing)
	if err != nil {
		panic(err)
	}
	for _, s := range reg.Schedules() {
		fmt.Println(s.Name, s.Source)
	}

	ops := registry.MustNew(registry.Schedule{Name: "maintenance:prune", Expr: "0 4 * * *", Handler: nop, Source: "cleanup.go:30"})
	_, err = registry.Merge(jobs, billing, ops)
	fmt.Println(err)
	// Output:
	// billing:invoice invoice.go:9
	// maintenance:prune prune.go:12
	// schedule name "maintenance:prune" is in registries 1 and 3 (declared at prune.go:12 and cleanup.go:30); names must be unique across the service, set name= on one
}
