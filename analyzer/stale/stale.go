package stale

import (
	_ "embed"
	"fmt"
	"go/ast"
	"go/constant"
	"go/token"
	"go/types"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/tools/go/analysis"

	"github.com/belfry/belfry/analyzer/internal/cronpass"
	"github.com/belfry/belfry/registry"
)

//go:embed doc.go
var doc string

// Analyzer is the stale check.
var Analyzer = &analysis.Analyzer{
	Name:     "stale",
	Doc:      cronpass.MustDoc(doc, "stale"),
	URL:      "https://github.com/belfry/belfry/tree/main/analyzer/stale",
	Requires: []*analysis.Analyzer{cronpass.Analyzer},
	Run:      run,
}

// fields are the registry.Schedule fields that a directive's expression
// and keys set, each with the key that sets it ("" for the expression) and
// its value in a directive's schedule. Name and Handler are matched apart;
// Source and Package do not change what the service runs.
var fields = []struct {
	name, key string
	value     func(*registry.Schedule) any
}{
	{"Expr", "", func(s *registry.Schedule) any { return s.Expr }},
	{"Zone", "tz", func(s *registry.Schedule) any { return s.Zone }},
	{"Queue", "queue", func(s *registry.Schedule) any { return s.Queue }},
	{"Timeout", "timeout", func(s *registry.Schedule) any { return s.Timeout }},
	{"MaxRetry", "retry", func(s *registry.Schedule) any { return s.MaxRetry }},
	{"Grace", "grace", func(s *registry.Schedule) any { return s.Grace }},
	{"Overlap", "overlap", func(s *registry.Schedule) any { return string(s.Overlap) }},
	{"Misfire", "misfire", func(s *registry.Schedule) any { return string(s.Misfire) }},
	{"Resume", "resume", func(s *registry.Schedule) any { return string(s.Resume) }},
	{"Phase", "phase", func(s *registry.Schedule) any { return s.Phase }},
	{"Per", "per", func(s *registry.Schedule) any { return s.Per }},
}

// entry is one registry.Schedule literal of the generated file.
type entry struct {
	name    string
	namePos ast.Node // the Name value, where an orphan is reported
	// values holds each of fields as text, as a directive would write it;
	// a field the literal leaves out holds its zero value's text.
	values  map[string]string
	handler *types.Func // nil when the Handler expression is not one crongen writes
	payload *types.Var  // the third argument a payload handler is called with
	matched bool
}

func run(pass *analysis.Pass) (any, error) {
	res := cronpass.Of(pass)
	var schedules []*cronpass.Entry
	for _, e := range res.Schedules {
		if !strings.HasSuffix(pass.Fset.File(e.Comment.Pos()).Name(), "_test.go") {
			schedules = append(schedules, e)
		}
	}
	gen := generatedFile(pass)
	if gen == nil {
		if len(schedules) > 0 {
			e := schedules[0]
			cronpass.Report(pass, e, analysis.Diagnostic{Pos: e.Comment.Slash, End: e.Comment.End(), Message: fmt.Sprintf(
				"package %s has //cron:schedule directives but no %s; %srun go generate", pass.Pkg.Name(), registry.GeneratedFile, generateHint(pass))})
		}
		return nil, nil
	}
	entries := generatedEntries(pass, gen)
	byName, byHandler := map[string]*entry{}, map[*types.Func]*entry{}
	for _, en := range entries {
		byName[en.name] = en
		if en.handler != nil {
			byHandler[en.handler] = en
		}
	}
	// A package whose directives crongen would refuse keeps its old file
	// until they are fixed; its entries are compared, but an entry left
	// without a directive may be one of those being fixed.
	broken := len(res.Schedules) != len(res.Entries)
	names := map[string]int{}
	for _, e := range schedules {
		names[e.Name]++
	}
	for _, e := range schedules {
		if names[e.Name] > 1 {
			broken = true // the directive check reports the duplicate
			continue
		}
		fn, _ := pass.TypesInfo.Defs[e.Func.Name].(*types.Func)
		en := byName[e.Name]
		if en == nil || en.matched {
			if en = byHandler[fn]; en == nil || en.matched || names[en.name] > 0 {
				cronpass.Report(pass, e, analysis.Diagnostic{Pos: e.Comment.Slash, End: e.Comment.End(), Message: fmt.Sprintf(
					"schedule %q is not in %s; run go generate", e.Name, registry.GeneratedFile)})
				continue
			}
		}
		en.matched = true
		compare(pass, e, fn, en)
	}
	if broken {
		return nil, nil
	}
	for _, en := range entries {
		if !en.matched {
			pass.Report(analysis.Diagnostic{Pos: en.namePos.Pos(), End: en.namePos.End(), Message: fmt.Sprintf(
				"%s has schedule %q, which no //cron:schedule declares; run go generate", registry.GeneratedFile, en.name)})
		}
	}
	return nil, nil
}

// generatedFile returns the package's zz_generated.cron.go, if crongen
// wrote it.
func generatedFile(pass *analysis.Pass) *ast.File {
	for _, f := range pass.Files {
		if filepath.Base(pass.Fset.File(f.Pos()).Name()) != registry.GeneratedFile {
			continue
		}
		if len(f.Comments) > 0 && f.Comments[0].List[0].Text == registry.GeneratedHeader && f.Comments[0].Pos() < f.Package {
			return f
		}
	}
	return nil
}

// generateHint tells how to get a generated file when no file of the
// package asks go generate for one.
func generateHint(pass *analysis.Pass) string {
	for _, f := range pass.Files {
		for _, group := range f.Comments {
			for _, c := range group.List {
				if strings.HasPrefix(c.Text, "//go:generate ") && strings.Contains(c.Text, "crongen") {
					return ""
				}
			}
		}
	}
	return "add //go:generate go tool crongen to one file and "
}

// generatedEntries returns every registry.Schedule literal of the
// generated file, whichever declaration holds it (var Registry or
// func NewRegistry), with its values read through the type checker:
// constants and durations such as 20 * time.Minute are compared by value,
// not by spelling.
func generatedEntries(pass *analysis.Pass, f *ast.File) []*entry {
	var entries []*entry
	ast.Inspect(f, func(n ast.Node) bool {
		lit, ok := n.(*ast.CompositeLit)
		if !ok || !isSchedule(pass.TypesInfo.TypeOf(lit)) {
			return true
		}
		en := &entry{namePos: lit, values: map[string]string{}}
		var zero registry.Schedule
		for _, fl := range fields {
			en.values[fl.name] = text(fl.value(&zero))
		}
		for _, elt := range lit.Elts {
			kv, ok := elt.(*ast.KeyValueExpr)
			if !ok {
				continue
			}
			key, _ := kv.Key.(*ast.Ident)
			if key == nil {
				continue
			}
			switch key.Name {
			case "Name":
				en.namePos = kv.Value
				if v := pass.TypesInfo.Types[kv.Value].Value; v != nil && v.Kind() == constant.String {
					en.name = constant.StringVal(v)
				}
			case "Handler":
				en.handler, en.payload = handlerOf(pass, kv.Value)
			default:
				for _, fl := range fields {
					if fl.name == key.Name {
						en.values[fl.name] = constantText(pass.TypesInfo.Types[kv.Value].Value, fl.value(&zero), kv.Value)
					}
				}
			}
		}
		entries = append(entries, en)
		return false
	})
	return entries
}

func isSchedule(t types.Type) bool {
	n, ok := types.Unalias(t).(*types.Named)
	return ok && n.Obj().Name() == "Schedule" && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == registry.ImportPath
}

// handlerOf returns the function a generated Handler value runs: Prune,
// jobs.Prune (a method bound to NewRegistry's parameter), or a closure
// calling Prune(ctx, occ, payloadVar).
func handlerOf(pass *analysis.Pass, x ast.Expr) (*types.Func, *types.Var) {
	if lit, ok := x.(*ast.FuncLit); ok {
		if len(lit.Body.List) != 1 {
			return nil, nil
		}
		ret, ok := lit.Body.List[0].(*ast.ReturnStmt)
		if !ok || len(ret.Results) != 1 {
			return nil, nil
		}
		call, ok := ret.Results[0].(*ast.CallExpr)
		if !ok || len(call.Args) != 3 {
			return nil, nil
		}
		fn, _ := handlerOf(pass, call.Fun)
		var payload *types.Var
		if id, ok := ast.Unparen(call.Args[2]).(*ast.Ident); ok {
			payload, _ = pass.TypesInfo.Uses[id].(*types.Var)
		}
		return fn, payload
	}
	var id *ast.Ident
	switch x := ast.Unparen(x).(type) {
	case *ast.Ident:
		id = x
	case *ast.SelectorExpr:
		id = x.Sel
	default:
		return nil, nil
	}
	fn, _ := pass.TypesInfo.Uses[id].(*types.Func)
	return fn, nil
}

// text writes a field's value as a directive would.
func text(v any) string {
	switch v := v.(type) {
	case time.Duration:
		return registry.FormatDuration(v)
	case int:
		return strconv.Itoa(v)
	case string:
		return v
	}
	panic(fmt.Sprintf("stale: no text for %T", v))
}

// constantText writes the constant v, of the type of like, as text does;
// a value that is not such a constant (crongen writes none) is written as
// its source, which no directive value equals.
func constantText(v constant.Value, like any, x ast.Expr) string {
	switch like.(type) {
	case string:
		if v != nil && v.Kind() == constant.String {
			return text(constant.StringVal(v))
		}
	case time.Duration, int:
		if v != nil && v.Kind() == constant.Int {
			if n, exact := constant.Int64Val(v); exact {
				if _, ok := like.(int); ok {
					return text(int(n))
				}
				return text(time.Duration(n))
			}
		}
	}
	return "(" + types.ExprString(x) + ")"
}

// compare reports each difference between the directive e, on the
// handler fn, and its generated entry en.
func compare(pass *analysis.Pass, e *cronpass.Entry, fn *types.Func, en *entry) {
	d := e.Directive
	want := d.Schedule(e.Name)
	report := func(pos, end token.Pos, format string, args ...any) {
		cronpass.Report(pass, e, analysis.Diagnostic{Pos: pos, End: end, Message: fmt.Sprintf(format, args...) + "; run go generate"})
	}
	if en.name != e.Name {
		pos, end := e.Comment.Slash, e.Comment.End()
		if kv, ok := d.Key("name"); ok {
			pos, end = kv.ValuePos, kv.ValuePos+token.Pos(len(kv.Value))
		}
		report(pos, end, "%s has this handler's schedule as %q, not %q", registry.GeneratedFile, en.name, e.Name)
	}
	for _, fl := range fields {
		got, now := en.values[fl.name], text(fl.value(&want))
		if got == now {
			continue
		}
		if fl.key == "" {
			report(d.ExprPos, d.ExprPos+token.Pos(len(d.Expr)+2), "%s has %s for %q", registry.GeneratedFile, strconv.Quote(got), e.Name)
			continue
		}
		held := fmt.Sprintf("%s=%s", fl.key, got)
		if got == text(fl.value(&registry.Schedule{})) {
			held = "no " + fl.key + "="
		}
		if kv, ok := d.Key(fl.key); ok {
			report(kv.ValuePos, kv.ValuePos+token.Pos(len(kv.Value)), "%s has %s for %q", registry.GeneratedFile, held, e.Name)
		} else {
			report(e.Comment.Slash, e.Comment.End(), "%s has %s for %q, not the default %s", registry.GeneratedFile, held, e.Name, now)
		}
	}
	if fn != nil && en.handler != fn {
		ran := "another handler"
		if en.handler != nil {
			ran = funcName(pass, en.handler)
		}
		report(e.Func.Name.Pos(), e.Func.Name.End(), "%s runs %s for %q, not %s", registry.GeneratedFile, ran, e.Name, funcName(pass, fn))
	}
	payload := cronpass.PayloadVar(pass, e)
	if en.payload != payload && (payload != nil || en.payload != nil) {
		held := "no payload"
		if en.payload != nil {
			held = "payload=" + en.payload.Name()
		}
		pos, end := e.Func.Name.Pos(), e.Func.Name.End()
		if kv, ok := d.Key("payload"); ok {
			pos, end = kv.ValuePos, kv.ValuePos+token.Pos(len(kv.Value))
		}
		report(pos, end, "%s passes %s to %q", registry.GeneratedFile, held, e.Name)
	}
}

// funcName names a handler as its package writes it: Prune, (*Jobs).Prune.
func funcName(pass *analysis.Pass, fn *types.Func) string {
	recv := fn.Signature().Recv()
	if recv == nil {
		return fn.Name()
	}
	t := types.TypeString(recv.Type(), types.RelativeTo(pass.Pkg))
	if strings.HasPrefix(t, "*") {
		t = "(" + t + ")"
	}
	return t + "." + fn.Name()
}
