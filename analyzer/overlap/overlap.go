// Package overlap defines an Analyzer that reports schedules whose runs
// may overlap.
package overlap

import (
	"fmt"
	"go/token"
	"strings"
	"time"

	"golang.org/x/tools/go/analysis"

	"github.com/belfry/belfry/analyzer/internal/cronpass"
	"github.com/belfry/belfry/registry"
)

const doc = `report a timeout longer than the gap between two occurrences

When a run may take longer than the shortest gap between two consecutive
occurrences, the next occurrence starts while the previous one still
runs: two copies of the job work on the same data at once. The gap is
measured with the schedule's own fire times over one sample year (366 days
from 2026-01-01T00:00:00Z), so daylight-saving transitions count. The
report is at the timeout= key, or at the expression when the default
timeout (30m) applies; the fix adds overlap=skip, which records a slot
that comes due while the previous run is pending or running as skipped.`

// Analyzer is the overlap check.
var Analyzer = &analysis.Analyzer{
	Name:     "overlap",
	Doc:      doc,
	URL:      "https://github.com/belfry/belfry/tree/main/analyzer/overlap",
	Requires: []*analysis.Analyzer{cronpass.Analyzer},
	Run:      run,
}

// maxFires bounds the work per schedule; schedules that fire that often
// are regular, so the first 100,000 fires hold their shortest gap.
const maxFires = 100_000

func run(pass *analysis.Pass) (any, error) {
	for _, e := range cronpass.Of(pass).Schedules {
		d := e.Directive
		if d.Overlap == registry.OverlapSkip {
			continue
		}
		gap, at, ok := time.Duration(0), time.Time{}, false
		if every := d.Cron.Every(); every > 0 {
			gap, ok = every, true
		} else {
			gap, at, ok = cronpass.ShortestGap(cronpass.Fires(d.Cron, 366, maxFires))
		}
		if !ok || d.Timeout <= gap {
			continue
		}
		when := ""
		if !at.IsZero() {
			when = ", e.g. from " + at.UTC().Format("2006-01-02 15:04:05 UTC")
		}
		diag := analysis.Diagnostic{
			Pos: d.ExprPos, End: d.ExprPos + token.Pos(len(d.Expr)+2),
			Message: fmt.Sprintf("the default timeout of %s is longer than the shortest gap between two occurrences of %q (%s%s): a slow run is still going when the next one starts; add overlap=skip or set a shorter timeout=",
				short(d.Timeout), e.Name, short(gap), when),
			SuggestedFixes: []analysis.SuggestedFix{skipFix(e)},
		}
		if kv, ok := d.Key("timeout"); ok {
			diag.Pos, diag.End = kv.KeyPos, kv.ValuePos+token.Pos(len(kv.Value))
			diag.Message = fmt.Sprintf("timeout=%s is longer than the shortest gap between two occurrences of %q (%s%s): a slow run is still going when the next one starts; add overlap=skip or shorten the timeout",
				kv.Value, e.Name, short(gap), when)
		}
		cronpass.Report(pass, e, diag)
	}
	return nil, nil
}

func skipFix(e *cronpass.Entry) analysis.SuggestedFix {
	edit := analysis.TextEdit{Pos: e.Comment.End(), End: e.Comment.End(), NewText: []byte(" overlap=skip")}
	if kv, ok := e.Directive.Key("overlap"); ok {
		edit = analysis.TextEdit{Pos: kv.ValuePos, End: kv.ValuePos + token.Pos(len(kv.Value)), NewText: []byte("skip")}
	}
	return analysis.SuggestedFix{Message: "Skip a slot while the previous run is still going (overlap=skip)", TextEdits: []analysis.TextEdit{edit}}
}

// short formats d without zero units: 1h, 1h30m, 90s rather than 1h0m0s.
func short(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
