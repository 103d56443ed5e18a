package zone_test

import (
	"path/filepath"
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/belfry/belfry/analyzer/zone"
)

func TestAnalyzer(t *testing.T) {
	testdata, err := filepath.Abs(filepath.Join("..", "testdata"))
	if err != nil {
		t.Fatal(err)
	}
	// The dates in the messages depend on -now.
	if err := zone.Analyzer.Flags.Set("now", "2026-01-01T00:00:00Z"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { zone.Analyzer.Flags.Set("now", "") })
	analysistest.Run(t, testdata, zone.Analyzer, "zone")
}
