package pileup_test

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
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

// TestCrowdMessagesStayShort lints 400 schedules with long names in one
// minute: each reported schedule gets one line that names a few of the
// others, however large the crowd.
func TestCrowdMessagesStayShort(t *testing.T) {
	const n = 400
	var src strings.Builder
	src.WriteString("package crowd\n\nimport (\n\t\"context\"\n\n\t\"github.com/belfry/belfry/registry\"\n)\n")
	for i := range n {
		fmt.Fprintf(&src, "\n//cron:schedule \"0 0 * * *\" name=nightly-export-of-the-warehouse-tables-for-the-finance-team-%03d\nfunc Job%03d(ctx context.Context, occ registry.Occurrence) error { return nil }\n", i, i)
	}
	dir := testmod.Write(t, map[string]string{
		"go.mod":         "module example.com/crowd\n\ngo 1.26.0\n\nrequire github.com/belfry/belfry v0.0.0\n",
		"crowd/crowd.go": src.String(),
	})
	results := analysistest.Run(&quiet{t}, dir, pileup.Analyzer, "./...")
	if len(results) != 1 {
		t.Fatalf("%d results, want 1", len(results))
	}
	diags := results[0].Diagnostics
	if want := n - 2; len(diags) != want {
		t.Errorf("%d diagnostics, want %d: all but the two kept", len(diags), want)
	}
	for _, d := range diags {
		if len(d.Message) > 300 || strings.Contains(d.Message, "\n") {
			t.Fatalf("diagnostic of %d bytes, want one short line: %s", len(d.Message), d.Message)
		}
		if !threeNames.MatchString(d.Message) {
			t.Fatalf("diagnostic does not name a few others by their distinct ends and say how many more collide: %s", d.Message)
		}
	}
}

var threeNames = regexp.MustCompile(`with "nightly-export…nce-team-\d{3}", "nightly-export…nce-team-\d{3}", "nightly-export…nce-team-\d{3}" and 396 more \(`)

// quiet is a testing.T for analysistest that drops the complaints about
// diagnostics without a // want comment: the test checks them itself.
type quiet struct{ *testing.T }

func (q *quiet) Errorf(format string, args ...any) {
	if msg := fmt.Sprintf(format, args...); !strings.Contains(msg, "unexpected diagnostic") {
		q.T.Error(msg)
	}
}
