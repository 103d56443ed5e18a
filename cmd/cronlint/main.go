// Command cronlint checks //cron:schedule directives, their handlers, and
// that the generated registry (zz_generated.cron.go) still matches them.
//
// It runs standalone (cronlint ./...) or as a vet tool
// (go vet -vettool=$(which cronlint) ./...); cronlint help <check> shows
// what a check reports and why. -fix applies the suggested fixes, which
// rewrite only what is reported; the generated registry holds the
// expressions, so run go generate afterwards. Each check can be silenced
// for one schedule with //cronlint:ignore <check> <reason> in the
// directive's doc comment.
package main

import (
	"golang.org/x/tools/go/analysis/multichecker"

	"github.com/belfry/belfry/analyzer/directive"
	"github.com/belfry/belfry/analyzer/idempotent"
	"github.com/belfry/belfry/analyzer/overlap"
	"github.com/belfry/belfry/analyzer/pileup"
	"github.com/belfry/belfry/analyzer/stale"
	"github.com/belfry/belfry/analyzer/zone"
)

func main() {
	multichecker.Main(directive.Analyzer, pileup.Analyzer, zone.Analyzer, idempotent.Analyzer, overlap.Analyzer, stale.Analyzer)
}
