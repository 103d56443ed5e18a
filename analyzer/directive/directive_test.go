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
