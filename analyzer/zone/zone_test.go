package zone_test

import (
	"path/filepath"
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/belfry/belfry/analyzer/internal/testmod"
	"github.com/belfry/belfry/analyzer/zone"
)

// TestAnalyzer runs without -now: the dates in the messages are those of
// the sample year from cronpass.Reference, whatever day the test runs.
func TestAnalyzer(t *testing.T) {
	dir := testmod.Extract(t, filepath.Join("testdata", "zone.txtar"))
	analysistest.Run(t, dir, zone.Analyzer, "./...")
}

// TestNowFlag moves the sample year: the fold of 2027 is named instead.
func TestNowFlag(t *testing.T) {
	if err := zone.Analyzer.Flags.Set("now", "2027-01-01T00:00:00Z"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { zone.Analyzer.Flags.Set("now", "") })
	dir := testmod.Write(t, map[string]string{
		"go.mod": "module example.com/z\n\ngo 1.26.0\n\nrequire github.com/belfry/belfry v0.0.0\n",
		"z/z.go": `package z

import (
	"context"

	"github.com/belfry/belfry/registry"
)

// want +2 ` + "`" + `01:30 happens twice on 2027-11-07 \(runs once\)` + "`" + `
//
//cron:schedule "30 1 * * *" tz=America/New_York
func Fold(ctx context.Context, occ registry.Occurrence) error { return nil }
`,
	})
	analysistest.Run(t, dir, zone.Analyzer, "./...")
}
