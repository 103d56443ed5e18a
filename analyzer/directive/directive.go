package directive

import (
	_ "embed"
	"fmt"
	"go/token"
	"go/types"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/tools/go/analysis"

	"github.com/belfry/belfry/analyzer/internal/cronpass"
	"github.com/belfry/belfry/registry"
)

//go:embed doc.go
var doc string

// Analyzer is the directive check.
var Analyzer = &analysis.Analyzer{
	Name:     "directive",
	Doc:      cronpass.MustDoc(doc, "directive"),
	URL:      "https://github.com/belfry/belfry/tree/main/analyzer/directive",
	Requires: []*analysis.Analyzer{cronpass.Analyzer},
	Run:      run,
}

func run(pass *analysis.Pass) (any, error) {
	res := cronpass.Of(pass)
	for _, e := range res.Entries {
		switch {
		case e.Err != nil:
			// Every problem of the directive, so one run shows them all.
			errs := e.Found.Errs
			if len(errs) == 0 {
				errs = registry.PosErrors{e.Err}
			}
			for i, perr := range errs {
				d := analysis.Diagnostic{Pos: perr.Pos, End: perr.End, Message: perr.Msg}
				if fix, ok := zonePrefixFix(e); ok && i == 0 {
					d.SuggestedFixes = []analysis.SuggestedFix{fix}
				}
				cronpass.Report(pass, e, d)
			}
		case registry.MisplacedError(e.Found) != nil:
			err := registry.MisplacedError(e.Found)
			cronpass.Report(pass, e, analysis.Diagnostic{Pos: err.Pos, End: err.End, Message: err.Msg})
		default:
			checkHandler(pass, e)
		}
	}
	for _, c := range res.Spaced {
		slash := strings.Index(c.Text[2:], "cron:") + 2
		pass.Report(analysis.Diagnostic{
			Pos: c.Slash, End: c.Slash + token.Pos(slash+len("cron:")),
			Message: fmt.Sprintf("%q has a space after //: Go ignores it and the schedule does not exist; write //cron:", c.Text[:slash+len("cron:")]),
			SuggestedFixes: []analysis.SuggestedFix{{
				Message:   "Remove the space after //",
				TextEdits: []analysis.TextEdit{{Pos: c.Slash + 2, End: c.Slash + token.Pos(slash)}},
			}},
		})
	}
	for _, ig := range res.Ignores {
		checkIgnore(pass, ig)
	}
	checkNames(pass, res.Schedules)
	return nil, nil
}

// checkNames reports a schedule whose name an earlier schedule of the
// package has, at its name= value (or its expression when the name is
// the default), naming where the first one is.
func checkNames(pass *analysis.Pass, schedules []*cronpass.Entry) {
	first := map[string]*cronpass.Entry{}
	for _, e := range schedules {
		prev, dup := first[e.Name]
		if !dup {
			first[e.Name] = e
			continue
		}
		pos, end := e.Directive.ExprPos, e.Directive.ExprPos+token.Pos(len(e.Directive.Expr)+2)
		if kv, ok := e.Directive.Key("name"); ok {
			pos, end = kv.ValuePos, kv.ValuePos+token.Pos(len(kv.Value))
		}
		at := pass.Fset.Position(prev.Comment.Slash)
		cronpass.Report(pass, e, analysis.Diagnostic{Pos: pos, End: end, Message: fmt.Sprintf(
			"schedule name %q is already used at %s:%d:%d; give this one another name=", e.Name, filepath.Base(at.Filename), at.Line, at.Column)})
	}
}

const ignoreExample = cronpass.IgnorePrefix + " pileup reports are batched downstream"

func checkIgnore(pass *analysis.Pass, ig *cronpass.Ignore) {
	c := ig.Comment
	var msg string
	switch {
	case ig.Check == "":
		msg = fmt.Sprintf("%s needs a check and a reason; checks are %s, e.g. %s", cronpass.IgnorePrefix, strings.Join(cronpass.Checks, ", "), ignoreExample)
	case !slices.Contains(cronpass.Checks, ig.Check):
		msg = fmt.Sprintf("%s names unknown check %q; checks are %s, e.g. %s", cronpass.IgnorePrefix, ig.Check, strings.Join(cronpass.Checks, ", "), ignoreExample)
	case ig.Reason == "":
		msg = fmt.Sprintf("%s %s needs a reason, so the next reader knows why the check does not apply, e.g. %s", cronpass.IgnorePrefix, ig.Check, ignoreExample)
	case !ig.Used:
		msg = fmt.Sprintf("%s has no effect here: put it in the doc comment of the //cron:schedule directive it is about", cronpass.IgnorePrefix)
	default:
		return
	}
	pass.Report(analysis.Diagnostic{Pos: c.Slash, End: c.End(), Message: msg})
}

// zonePrefixFix moves a CRON_TZ=Zone or TZ=Zone prefix of the expression
// to a tz= key, when the zone is valid and no tz= key competes with it.
func zonePrefixFix(e *cronpass.Entry) (analysis.SuggestedFix, bool) {
	c := e.Comment
	off := int(e.Err.Pos - c.Slash)
	if off < 0 || off >= len(c.Text) {
		return analysis.SuggestedFix{}, false
	}
	rest := c.Text[off:]
	var zone string
	for _, prefix := range []string{"CRON_TZ=", "TZ="} {
		if after, ok := strings.CutPrefix(rest, prefix); ok {
			zone, _, _ = strings.Cut(after, " ")
			zone = strings.TrimRight(zone, `"`)
			rest = prefix + zone
		}
	}
	if zone == "" || strings.Contains(c.Text, " tz=") {
		return analysis.SuggestedFix{}, false
	}
	if _, err := registry.LoadZone(zone); err != nil {
		return analysis.SuggestedFix{}, false
	}
	end := off + len(rest)
	for end < len(c.Text) && c.Text[end] == ' ' {
		end++
	}
	return analysis.SuggestedFix{
		Message: "Move the zone to tz=" + zone,
		TextEdits: []analysis.TextEdit{
			{Pos: c.Slash + token.Pos(off), End: c.Slash + token.Pos(end)},
			{Pos: c.End(), End: c.End(), NewText: []byte(" tz=" + zone)},
		},
	}, true
}

func checkHandler(pass *analysis.Pass, e *cronpass.Entry) {
	fn, ok := pass.TypesInfo.Defs[e.Func.Name].(*types.Func)
	if !ok {
		return
	}
	var payload types.Type
	if name := e.Directive.Payload; name != "" {
		v := cronpass.PayloadVar(pass, e)
		if v == nil {
			kv, _ := e.Directive.Key("payload")
			cronpass.Report(pass, e, analysis.Diagnostic{
				Pos: kv.ValuePos, End: kv.ValuePos + token.Pos(len(kv.Value)),
				Message: fmt.Sprintf("payload=%s names no package-level variable of package %s; declare one, e.g. %s", name, pass.Pkg.Name(), payloadExample(pass, fn, name)),
			})
			return
		}
		payload = v.Type()
	}
	if err := registry.CheckHandler(fn, payload); err != nil {
		cronpass.Report(pass, e, analysis.Diagnostic{Pos: e.Func.Name.Pos(), End: e.Func.Type.End(), Message: err.Error()})
	}
}

// payloadExample is a declaration of the variable payload=name asks for,
// of the type the handler's third parameter has.
func payloadExample(pass *analysis.Pass, fn *types.Func, name string) string {
	params := fn.Signature().Params()
	if params.Len() != 3 {
		return fmt.Sprintf("var %s = ..., and a third parameter of its type", name)
	}
	typ := params.At(2).Type()
	text := types.TypeString(typ, types.RelativeTo(pass.Pkg))
	switch u := typ.Underlying().(type) {
	case *types.Struct:
		return fmt.Sprintf("var %s = %s{...}", name, text)
	case *types.Pointer:
		if _, ok := u.Elem().Underlying().(*types.Struct); ok {
			return fmt.Sprintf("var %s = &%s{...}", name, types.TypeString(u.Elem(), types.RelativeTo(pass.Pkg)))
		}
	}
	return fmt.Sprintf("var %s %s", name, text)
}
