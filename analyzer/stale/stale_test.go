package stale_test

import (
	"path/filepath"
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/belfry/belfry/analyzer/internal/testmod"
	"github.com/belfry/belfry/analyzer/stale"
)

// TestAnalyzer lints packages whose generated files crongen wrote before
// their directives changed: a fresh one (funcs, a payload, a phase, a
// family, methods bound by NewRegistry), a changed expression, changed,
// added and removed keys, a changed payload, a handler the directive moved
// to, a directive with no entry, an entry with no directive, a renamed
// schedule, and a package that was never generated.
func TestAnalyzer(t *testing.T) {
	dir := testmod.Extract(t, filepath.Join("testdata", "stale.txtar"))
	analysistest.Run(t, dir, stale.Analyzer, "./...")
}
