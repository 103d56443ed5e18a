package zone_test

import (
	"path/filepath"
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/belfry/belfry/analyzer/internal/testmod"
	"github.com/belfry/belfry/analyzer/zone"
)

func TestAnalyzer(t *testing.T) {
	// The dates in the messages depend on -now.
	if err := zone.Analyzer.Flags.Set("now", "2026-01-01T00:00:00Z"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { zone.Analyzer.Flags.Set("now", "") })
	dir := testmod.Extract(t, filepath.Join("testdata", "zone.txtar"))
	analysistest.Run(t, dir, zone.Analyzer, "./...")
}
