// Package clash is a crongen fixture: package-level names that the generated
// file's imports and closure parameters would otherwise collide with.
package clash

import (
	stdctx "context"
	"fmt"

	reg "github.com/belfry/belfry/registry"
)

// These ordinary package-level names shadow what the generated file imports.
var (
	registry = map[string]int{}
	asynq    = "not the package"
	time     = 0
)

func context() string { return "not the package either" }

// occ is a payload whose name a generated closure parameter must not take.
var occ = 3

// Count runs every night.
//
//cron:schedule "0 0 * * *"
func Count(ctx stdctx.Context, o reg.Occurrence) error {
	registry[o.Key()]++
	time++
	fmt.Println(asynq, context(), len(registry), time)
	return nil
}

// Limit receives the package-level occ.
//
//cron:schedule "0 1 * * *" payload=occ
func Limit(ctx stdctx.Context, o reg.Occurrence, n int) error {
	fmt.Println("limit", n, o.Key())
	return nil
}
