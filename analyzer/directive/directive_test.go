package directive_test

import (
	"path/filepath"
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/belfry/belfry/analyzer/directive"
	"github.com/belfry/belfry/analyzer/internal/testmod"
)

func TestAnalyzer(t *testing.T) {
	dir := testmod.Extract(t, filepath.Join("testdata", "directive.txtar"))
	analysistest.RunWithSuggestedFixes(t, dir, directive.Analyzer, "./...")
}

// TestMethodDirective checks that a directive on a method handler is not
// reported: registry accepts method handlers, and the check follows it.
func TestMethodDirective(t *testing.T) {
	want := ""
	dir := testmod.Write(t, map[string]string{
		"go.mod": "module example.com/m\n\ngo 1.26.0\n\nrequire github.com/belfry/belfry v0.0.0\n",
		"m/m.go": `package m

import (
	"context"

	"github.com/belfry/belfry/registry"
)

type Jobs struct{}

` + want + `//cron:schedule "0 3 * * *"
func (j *Jobs) Run(ctx context.Context, occ registry.Occurrence) error { return nil }
`,
	})
	analysistest.Run(t, dir, directive.Analyzer, "./...")
}
