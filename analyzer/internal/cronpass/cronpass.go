// Package cronpass finds the //cron:schedule directives of a package once,
// for all cronlint analyzers, and decides which diagnostics a
// //cronlint:ignore comment suppresses, so that every check agrees on both.
package cronpass

import (
	"go/ast"
	"go/token"
	"go/types"
	"reflect"
	"slices"
	"strings"
	"time"

	"golang.org/x/tools/go/analysis"

	"github.com/belfry/belfry/registry"
)

// Checks are the names of the cronlint analyzers, the words a
// //cronlint:ignore comment may name.
var Checks = []string{"directive", "idempotent", "overlap", "pileup", "stale", "zone"}

// IgnorePrefix starts a suppression comment: //cronlint:ignore <check> <reason>.
const IgnorePrefix = "//cronlint:ignore"

// Reference is where the sample windows of pileup and overlap start. It is
// fixed, not time.Now, so that a commit lints the same way on every day.
var Reference = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Analyzer computes a *Result for the other cronlint analyzers to require.
var Analyzer = &analysis.Analyzer{
	Name:       "cronpass",
	Doc:        "find //cron:schedule directives and //cronlint:ignore comments\n\nA building block for the cronlint analyzers; it reports nothing.",
	URL:        "https://github.com/belfry/belfry/tree/main/analyzer/internal/cronpass",
	Run:        run,
	ResultType: reflect.TypeFor[*Result](),
}

// Entry is one //cron: comment in a non-generated file.
type Entry struct {
	registry.Found
	File *ast.File
	// Name is the schedule's effective name (name= or the default derived
	// from package and function); empty unless the entry is a Schedule.
	Name    string
	ignores []*Ignore
}

// Ignore is one //cronlint:ignore comment.
type Ignore struct {
	Comment *ast.Comment
	Check   string // empty when the comment names none
	Reason  string
	// Used is set when the comment sits next to a directive.
	Used bool
}

// Result is what Analyzer finds in a package.
type Result struct {
	// Entries holds every //cron: comment, valid or not, in source order.
	Entries []*Entry
	// Schedules holds the entries that declare a schedule: valid
	// directives on a top-level func.
	Schedules []*Entry
	// Ignores holds every //cronlint:ignore comment.
	Ignores []*Ignore
	// Spaced holds comments such as "// cron:schedule ...", which Go does
	// not treat as directives, so the schedule silently does not exist.
	Spaced []*ast.Comment

	gaps gaps
}

func run(pass *analysis.Pass) (any, error) {
	res := new(Result)
	for _, f := range pass.Files {
		if ast.IsGenerated(f) {
			continue
		}
		var entries []*Entry
		for _, found := range registry.FindDirectives(f) {
			e := &Entry{Found: found, File: f}
			if found.Err == nil && registry.MisplacedError(found) == nil {
				e.Name = found.Directive.Name
				if e.Name == "" {
					e.Name = registry.DefaultName(pass.Pkg.Name(), found.Func.Name.Name)
				}
				res.Schedules = append(res.Schedules, e)
			}
			entries = append(entries, e)
		}
		res.Entries = append(res.Entries, entries...)
		for _, group := range f.Comments {
			for _, c := range group.List {
				if ig := parseIgnore(c); ig != nil {
					res.Ignores = append(res.Ignores, ig)
					attach(pass.Fset, ig, group, entries)
				} else if isSpaced(c.Text) {
					res.Spaced = append(res.Spaced, c)
				}
			}
		}
	}
	return res, nil
}

func parseIgnore(c *ast.Comment) *Ignore {
	rest, ok := strings.CutPrefix(c.Text, IgnorePrefix)
	if !ok || rest != "" && rest[0] != ' ' && rest[0] != '\t' {
		return nil
	}
	ig := &Ignore{Comment: c}
	check, reason, _ := strings.Cut(strings.TrimSpace(rest), " ")
	ig.Check, ig.Reason = check, strings.TrimSpace(reason)
	return ig
}

// attach links an ignore comment to the directives in its comment group
// (a doc comment), or on the line just above or below it.
func attach(fset *token.FileSet, ig *Ignore, group *ast.CommentGroup, entries []*Entry) {
	line := fset.Position(ig.Comment.Slash).Line
	for _, e := range entries {
		d := fset.Position(e.Comment.Slash).Line - line
		if slices.Contains(group.List, e.Comment) || d == 1 || d == -1 {
			e.ignores = append(e.ignores, ig)
			ig.Used = true
		}
	}
}

// isSpaced reports whether text is "// cron:name ...": a directive that
// Go ignores because of the space. Prose such as "// cron: runs nightly"
// is not one.
func isSpaced(text string) bool {
	rest, ok := strings.CutPrefix(text, "//")
	if !ok || rest == strings.TrimLeft(rest, " \t") {
		return false
	}
	name, ok := strings.CutPrefix(strings.TrimLeft(rest, " \t"), "cron:")
	return ok && name != "" && 'a' <= name[0] && name[0] <= 'z'
}

// Ignored reports whether a //cronlint:ignore comment next to e's
// directive names the analyzer of pass.
func Ignored(pass *analysis.Pass, e *Entry) bool {
	return slices.ContainsFunc(e.ignores, func(ig *Ignore) bool { return ig.Check == pass.Analyzer.Name })
}

// Report reports d unless a //cronlint:ignore comment next to e's
// directive names the reporting analyzer.
func Report(pass *analysis.Pass, e *Entry, d analysis.Diagnostic) {
	if !Ignored(pass, e) {
		pass.Report(d)
	}
}

// Of returns the cronpass result of pass, whose analyzer must require Analyzer.
func Of(pass *analysis.Pass) *Result { return pass.ResultOf[Analyzer].(*Result) }

// PayloadVar returns the package-level variable that e's payload= key
// names, or nil when there is no such key or no such variable.
func PayloadVar(pass *analysis.Pass, e *Entry) *types.Var {
	if e.Directive.Payload == "" {
		return nil
	}
	v, _ := pass.Pkg.Scope().Lookup(e.Directive.Payload).(*types.Var)
	return v
}

// Handler returns e's handler when its signature is valid (directive
// reports it otherwise), and the payload variable if any.
func Handler(pass *analysis.Pass, e *Entry) (*types.Func, *types.Var, bool) {
	fn, ok := pass.TypesInfo.Defs[e.Func.Name].(*types.Func)
	if !ok {
		return nil, nil, false
	}
	v := PayloadVar(pass, e)
	if e.Directive.Payload != "" && v == nil {
		return nil, nil, false
	}
	var payload types.Type
	if v != nil {
		payload = v.Type()
	}
	return fn, v, registry.CheckHandler(fn, payload) == nil
}
