package overlap

import (
	_ "embed"
	"fmt"
	"go/token"
	"time"

	"golang.org/x/tools/go/analysis"

	"github.com/belfry/belfry/analyzer/internal/cronpass"
	"github.com/belfry/belfry/registry"
)

//go:embed doc.go
var doc string

// Analyzer is the overlap check.
var Analyzer = &analysis.Analyzer{
	Name:     "overlap",
	Doc:      cronpass.MustDoc(doc, "overlap"),
	URL:      "https://github.com/belfry/belfry/tree/main/analyzer/overlap",
	Requires: []*analysis.Analyzer{cronpass.Analyzer},
	Run:      run,
}

func run(pass *analysis.Pass) (any, error) {
	res := cronpass.Of(pass)
	for _, e := range res.Schedules {
		d := e.Directive
		if d.Overlap != registry.OverlapAllow {
			continue // skip, buffer_one and replace each keep one run at a time
		}
		gap := res.Gap(e)
		if !gap.OK || d.Timeout <= gap.Len {
			continue
		}
		when := ""
		if !gap.At.IsZero() {
			when = " from " + gap.At.UTC().Format("2006-01-02 15:04:05 UTC")
		}
		diag := analysis.Diagnostic{
			Pos: d.ExprPos, End: d.ExprPos + token.Pos(len(d.Expr)+2),
			Message: fmt.Sprintf("default timeout %s is longer than the shortest gap between runs of %q, %s%s; add %s or a shorter timeout=%s",
				registry.FormatDuration(d.Timeout), e.Name, registry.FormatDuration(gap.Len), when, policies(d), checkpointHint(d, gap.Len)),
			SuggestedFixes: []analysis.SuggestedFix{skipFix(e)},
		}
		if kv, ok := d.Key("timeout"); ok {
			diag.Pos, diag.End = kv.KeyPos, kv.ValuePos+token.Pos(len(kv.Value))
			diag.Message = fmt.Sprintf("timeout=%s is longer than the shortest gap between runs of %q, %s%s; add %s or shorten it%s",
				kv.Value, e.Name, registry.FormatDuration(gap.Len), when, policies(d), checkpointHint(d, gap.Len))
		}
		cronpass.Report(pass, e, diag)
	}
	return nil, nil
}

// policies are the overlap= values that keep one run at a time: a family
// takes only skip.
func policies(d *registry.Directive) string {
	if d.Per != "" {
		return "overlap=skip"
	}
	return "overlap=skip, overlap=buffer_one or overlap=replace,"
}

// checkpointHint is said of a run that may outlast two or more gaps: work
// that long is cut off (by replace, a timeout or a deploy) more often
// than not, and resumes only if it saves its progress.
func checkpointHint(d *registry.Directive, gap time.Duration) string {
	if d.Timeout < 2*gap {
		return ""
	}
	return "; a run this long should checkpoint its batches, so that a cut-off run resumes"
}

func skipFix(e *cronpass.Entry) analysis.SuggestedFix {
	edit := analysis.TextEdit{Pos: e.Comment.End(), End: e.Comment.End(), NewText: []byte(" overlap=skip")}
	if kv, ok := e.Directive.Key("overlap"); ok {
		edit = analysis.TextEdit{Pos: kv.ValuePos, End: kv.ValuePos + token.Pos(len(kv.Value)), NewText: []byte("skip")}
	}
	return analysis.SuggestedFix{Message: "Skip a slot while the previous run is still going (overlap=skip)", TextEdits: []analysis.TextEdit{edit}}
}
