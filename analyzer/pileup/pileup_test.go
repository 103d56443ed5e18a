package pileup_test

import (
	"path/filepath"
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/belfry/belfry/analyzer/internal/testmod"
	"github.com/belfry/belfry/analyzer/pileup"
)

func TestAnalyzer(t *testing.T) {
	dir := testmod.Extract(t, filepath.Join("testdata", "pileup.txtar"))
	analysistest.RunWithSuggestedFixes(t, dir, pileup.Analyzer, "./...")
}

func TestThresholdFlag(t *testing.T) {
	if err := pileup.Analyzer.Flags.Set("threshold", "2"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pileup.Analyzer.Flags.Set("threshold", "3") })
	dir := testmod.Extract(t, filepath.Join("testdata", "pairs.txtar"))
	analysistest.RunWithSuggestedFixes(t, dir, pileup.Analyzer, "./...")
}

func TestSpreadMinute(t *testing.T) {
	seen := map[int]bool{}
	for _, name := range []string{"a", "b", "jobs.prune", "jobs.send-digest", "nightly-a", "nightly-b", "london"} {
		m := pileup.SpreadMinute(name)
		if m < 1 || m > 59 {
			t.Errorf("SpreadMinute(%q) = %d, want 1..59", name, m)
		}
		if m != pileup.SpreadMinute(name) {
			t.Errorf("SpreadMinute(%q) is not stable", name)
		}
		seen[m] = true
	}
	if len(seen) < 5 {
		t.Errorf("7 names land on only %d minutes; the hash does not spread", len(seen))
	}
}
