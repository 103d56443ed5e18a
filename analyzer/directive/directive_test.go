package directive_test

import (
	"path/filepath"
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/belfry/belfry/analyzer/directive"
)

func TestAnalyzer(t *testing.T) {
	// All analyzers share one GOPATH, so the registry stub exists once.
	testdata, err := filepath.Abs(filepath.Join("..", "testdata"))
	if err != nil {
		t.Fatal(err)
	}
	analysistest.RunWithSuggestedFixes(t, testdata, directive.Analyzer, "directive")
}
