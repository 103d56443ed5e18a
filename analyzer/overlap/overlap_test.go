package overlap_test

import (
	"path/filepath"
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/belfry/belfry/analyzer/internal/testmod"
	"github.com/belfry/belfry/analyzer/overlap"
)

func TestAnalyzer(t *testing.T) {
	dir := testmod.Extract(t, filepath.Join("testdata", "overlap.txtar"))
	analysistest.RunWithSuggestedFixes(t, dir, overlap.Analyzer, "./...")
}
