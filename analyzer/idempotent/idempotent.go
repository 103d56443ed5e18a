// Package idempotent defines an Analyzer that reports scheduled handlers
// which cannot be re-run safely.
package idempotent

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"strings"

	"golang.org/x/tools/go/analysis"

	"github.com/belfry/belfry/analyzer/internal/cronpass"
)

const doc = `report handlers that cannot be re-run safely

An occurrence may run more than once: asynq retries it, a manual trigger
re-runs it, and a retry may start after midnight. A handler is only safe
when it works on the period its occurrence names (occ.Slot) and makes its
effects happen once (occ.Key()). Reported:
  - a handler that discards its occurrence (an unnamed or _ parameter) or
    never reads it;
  - a call of time.Now in a handler, directly or through functions and
    methods of the same package, reported at the call in the handler with
    the chain of calls; a retry after midnight or a re-run next week would
    work on the wrong period (derive it from occ.Slot);
  - a payload= variable initialised from time.Now, math/rand, crypto/rand,
    uuid or the host (os.Hostname, os.Getpid): each replica and each
    restart holds a different value, so a retry elsewhere sees other input.`

// Analyzer is the idempotent check.
var Analyzer = &analysis.Analyzer{
	Name:     "idempotent",
	Doc:      doc,
	URL:      "https://github.com/belfry/belfry/tree/main/analyzer/idempotent",
	Requires: []*analysis.Analyzer{cronpass.Analyzer},
	Run:      run,
}

func run(pass *analysis.Pass) (any, error) {
	decls := map[*types.Func]*ast.FuncDecl{}
	for _, f := range pass.Files {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil {
				if fn, ok := pass.TypesInfo.Defs[fd.Name].(*types.Func); ok {
					decls[fn] = fd
				}
			}
		}
	}
	clock := &chains{info: pass.TypesInfo, decls: decls, pred: isNow, memo: map[*types.Func][]string{}}
	entropy := &chains{info: pass.TypesInfo, decls: decls, pred: nondeterministic, memo: map[*types.Func][]string{}}
	for _, e := range cronpass.Of(pass).Schedules {
		fn, payload, ok := cronpass.Handler(pass, e)
		if !ok {
			continue
		}
		occ := checkOccurrence(pass, e, fn)
		clock.each(e.Func.Body, func(chain []string, pos, end token.Pos) {
			how := "calls time.Now"
			if len(chain) > 1 {
				how = "reads the clock through " + strings.Join(chain, " → ")
			}
			cronpass.Report(pass, e, analysis.Diagnostic{Pos: pos, End: end, Message: fmt.Sprintf(
				"handler %s %s: a retry after midnight or a manual re-run would work on the wrong period; derive the period from %s.Slot",
				fn.Name(), how, occ)})
		})
		if payload != nil {
			if init := initializer(pass, payload); init != nil {
				entropy.each(init, func(chain []string, pos, end token.Pos) {
					cronpass.Report(pass, e, analysis.Diagnostic{Pos: pos, End: end, Message: fmt.Sprintf(
						"payload %s of handler %s is built from %s: each replica and each restart holds a different value, so a retry on another replica gets other input; use a value that is the same everywhere, or derive it in the handler from %s.Slot and %s.Key()",
						payload.Name(), fn.Name(), strings.Join(chain, " → "), occ, occ)})
				})
			}
		}
	}
	return nil, nil
}

// checkOccurrence reports a handler that discards or never reads its
// occurrence, and returns how messages should refer to it.
func checkOccurrence(pass *analysis.Pass, e *cronpass.Entry, fn *types.Func) string {
	var name *ast.Ident
	var at ast.Node
	i := 0
	for _, field := range e.Func.Type.Params.List {
		if len(field.Names) == 0 {
			if i == 1 {
				at = field.Type
			}
			i++
			continue
		}
		for _, id := range field.Names {
			if i == 1 {
				name, at = id, id
			}
			i++
		}
	}
	if name == nil || name.Name == "_" {
		cronpass.Report(pass, e, analysis.Diagnostic{Pos: at.Pos(), End: at.End(), Message: fmt.Sprintf(
			"handler %s discards its occurrence: name it (occ registry.Occurrence), derive the period it works on from occ.Slot and make its effects happen once with occ.Key(), so that a retry or a manual re-run is safe", fn.Name())})
		return "occ"
	}
	obj := pass.TypesInfo.Defs[name]
	used := false
	ast.Inspect(e.Func.Body, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok && pass.TypesInfo.Uses[id] == obj {
			used = true
		}
		return !used
	})
	if !used {
		cronpass.Report(pass, e, analysis.Diagnostic{Pos: name.Pos(), End: name.End(), Message: fmt.Sprintf(
			"handler %s never reads its occurrence %s: derive the period it works on from %s.Slot and make its effects happen once with %s.Key(), so that a retry or a manual re-run is safe", fn.Name(), name.Name, name.Name, name.Name)})
	}
	return name.Name
}

func isNow(f *types.Func) bool {
	return f.Pkg() != nil && f.Pkg().Path() == "time" && f.Name() == "Now"
}

func nondeterministic(f *types.Func) bool {
	if f.Pkg() == nil {
		return false
	}
	switch path := f.Pkg().Path(); path {
	case "time":
		return f.Name() == "Now" || f.Name() == "Since" || f.Name() == "Until"
	case "math/rand", "math/rand/v2", "crypto/rand":
		return true
	case "os":
		return f.Name() == "Hostname" || f.Name() == "Getpid"
	case "github.com/google/uuid":
		return strings.HasPrefix(f.Name(), "New")
	}
	return false
}

// chains finds calls that reach a function matching pred, directly or
// through functions declared in the package.
type chains struct {
	info  *types.Info
	decls map[*types.Func]*ast.FuncDecl
	pred  func(*types.Func) bool
	// memo holds, per function, the names of the calls from it to a pred
	// function, or nil when it reaches none. A function on the current
	// path maps to nil too, which cuts recursion.
	memo map[*types.Func][]string
}

// reach returns the chain of names from f to a pred function, or nil.
func (c *chains) reach(f *types.Func) []string {
	if c.pred(f) {
		return []string{f.Pkg().Name() + "." + f.Name()}
	}
	if chain, seen := c.memo[f]; seen {
		return chain
	}
	c.memo[f] = nil
	decl := c.decls[f]
	if decl == nil {
		return nil
	}
	var chain []string
	c.each(decl.Body, func(rest []string, _, _ token.Pos) {
		if chain == nil {
			chain = append([]string{f.Name()}, rest...)
		}
	})
	c.memo[f] = chain
	return chain
}

// each calls report for every reference in n to a function that reaches
// pred, with the chain and the range of the call (or of the reference,
// when the function is used as a value).
func (c *chains) each(n ast.Node, report func(chain []string, pos, end token.Pos)) {
	var stack []ast.Node
	ast.Inspect(n, func(n ast.Node) bool {
		if n == nil {
			stack = stack[:len(stack)-1]
			return true
		}
		stack = append(stack, n)
		id, ok := n.(*ast.Ident)
		if !ok {
			return true
		}
		f, ok := c.info.Uses[id].(*types.Func)
		if !ok {
			return true
		}
		chain := c.reach(f.Origin())
		if chain == nil {
			return true
		}
		var ref ast.Node = id
		for i := len(stack) - 2; i >= 0; i-- {
			switch p := stack[i].(type) {
			case *ast.SelectorExpr:
				if p.Sel != ref {
					break
				}
				ref = p
				continue
			case *ast.IndexExpr: // an instantiation, f[T]
				if p.X != ref {
					break
				}
				ref = p
				continue
			case *ast.IndexListExpr:
				if p.X != ref {
					break
				}
				ref = p
				continue
			case *ast.ParenExpr:
				ref = p
				continue
			case *ast.CallExpr:
				if p.Fun == ref {
					ref = p
				}
			}
			break
		}
		report(chain, ref.Pos(), ref.End())
		return true
	})
}

// initializer returns the expression a package-level variable is
// initialised with, or nil.
func initializer(pass *analysis.Pass, v *types.Var) ast.Expr {
	for _, f := range pass.Files {
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if pass.TypesInfo.Defs[name] != v {
						continue
					}
					switch {
					case len(vs.Values) == len(vs.Names):
						return vs.Values[i]
					case len(vs.Values) == 1:
						return vs.Values[0]
					}
					return nil
				}
			}
		}
	}
	return nil
}
