package idempotent

import (
	_ "embed"
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"strings"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/passes/inspect"
	"golang.org/x/tools/go/ast/edge"
	"golang.org/x/tools/go/ast/inspector"
	"golang.org/x/tools/go/types/typeutil"

	"github.com/belfry/belfry/analyzer/internal/cronpass"
)

//go:embed doc.go
var doc string

// Analyzer is the idempotent check.
var Analyzer = &analysis.Analyzer{
	Name:      "idempotent",
	Doc:       cronpass.MustDoc(doc, "idempotent"),
	URL:       "https://github.com/belfry/belfry/tree/main/analyzer/idempotent",
	Requires:  []*analysis.Analyzer{cronpass.Analyzer, inspect.Analyzer},
	Run:       run,
	FactTypes: []analysis.Fact{new(readsClock)},
}

// readsClock marks a function of the module that reads the clock,
// directly or through other functions: Chain is the calls from it to the
// clock, e.g. [jobs.periodStart jobs.today time.Now].
type readsClock struct{ Chain []string }

func (*readsClock) AFact()           {}
func (f *readsClock) String() string { return "readsClock(" + strings.Join(f.Chain, " → ") + ")" }

// maxChain bounds the chain a message shows.
const maxChain = 5

func run(pass *analysis.Pass) (any, error) {
	if !inModule(pass) && len(cronpass.Of(pass).Schedules) == 0 {
		return nil, nil // a dependency: nothing to report, no facts to share
	}
	insp := pass.ResultOf[inspect.Analyzer].(*inspector.Inspector)
	var decls []declared
	bodies := map[*types.Func]inspector.Cursor{}
	for cur := range insp.Root().Preorder((*ast.FuncDecl)(nil)) {
		fd := cur.Node().(*ast.FuncDecl)
		if fn, ok := pass.TypesInfo.Defs[fd.Name].(*types.Func); ok && fd.Body != nil {
			body := cur.ChildAt(edge.FuncDecl_Body, -1)
			decls = append(decls, declared{fn, body})
			bodies[fn] = body
		}
	}
	clock := newChains(pass, decls, isClockRead, inModule(pass))
	entropy := newChains(pass, decls, nondeterministic, false)

	// Export a fact for every function of the module that reads the
	// clock, so handlers in packages that import this one see it.
	if clock.facts {
		for _, d := range decls {
			if chain := clock.local[d.fn]; chain != nil {
				pass.ExportObjectFact(d.fn, &readsClock{Chain: qualify(pass.Pkg, chain[1:])})
			}
		}
	}

	for _, e := range cronpass.Of(pass).Schedules {
		fn, payload, ok := cronpass.Handler(pass, e)
		body, hasBody := bodies[fn]
		if !ok || !hasBody {
			continue // a body in assembly has nothing to check
		}
		occ := checkOccurrence(pass, e, fn, body)
		clock.each(body, func(chain []string, pos, end token.Pos) {
			cronpass.Report(pass, e, analysis.Diagnostic{Pos: pos, End: end, Message: fmt.Sprintf(
				"handler %s reads the clock (%s); derive the period from %s.Slot", fn.Name(), show(chain), occ)})
		})
		if payload != nil {
			if init, ok := initializer(insp, pass, payload); ok {
				entropy.each(init, func(chain []string, pos, end token.Pos) {
					cronpass.Report(pass, e, analysis.Diagnostic{Pos: pos, End: end, Message: fmt.Sprintf(
						"payload %s of handler %s is built from %s, which differs per replica and restart", payload.Name(), fn.Name(), show(chain))})
				})
			}
		}
	}
	return nil, nil
}

// inModule reports whether pass's package is code the user owns: in a
// module that is not a downloaded dependency. Facts are computed only
// there: a library that reads the clock for its own bookkeeping is not
// the handler choosing its period.
func inModule(pass *analysis.Pass) bool {
	return pass.Module != nil && pass.Module.Path != "" && pass.Module.Version == ""
}

// qualify names the functions of pkg in chain as pkg.F, for messages in
// the packages that import it.
func qualify(pkg *types.Package, chain []string) []string {
	out := make([]string, len(chain))
	for i, name := range chain {
		if !strings.Contains(name, ".") {
			name = pkg.Name() + "." + name
		}
		out[i] = name
	}
	return out
}

func show(chain []string) string {
	if len(chain) > maxChain {
		chain = append(chain[:maxChain-1:maxChain-1], "…", chain[len(chain)-1])
	}
	return strings.Join(chain, " → ")
}

// checkOccurrence reports a handler that discards or never reads its
// occurrence, and returns how messages should refer to it.
func checkOccurrence(pass *analysis.Pass, e *cronpass.Entry, fn *types.Func, body inspector.Cursor) string {
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
			"handler %s discards its occurrence; name it (occ registry.Occurrence) and use occ.Slot and occ.Key()", fn.Name())})
		return "occ"
	}
	obj := pass.TypesInfo.Defs[name]
	used := false
	for id := range body.Preorder((*ast.Ident)(nil)) {
		if pass.TypesInfo.Uses[id.Node().(*ast.Ident)] == obj {
			used = true
			break
		}
	}
	if !used {
		cronpass.Report(pass, e, analysis.Diagnostic{Pos: name.Pos(), End: name.End(), Message: fmt.Sprintf(
			"handler %s never reads its occurrence %s; use %s.Slot for the period and %s.Key() for effects", fn.Name(), name.Name, name.Name, name.Name)})
	}
	return name.Name
}

// isClockRead reports whether f reads the current time: returns it, a
// duration from it, or a channel that delivers it.
func isClockRead(f *types.Func) bool {
	if f.Pkg() == nil || f.Pkg().Path() != "time" || f.Signature().Recv() != nil {
		return false
	}
	switch f.Name() {
	case "Now", "Since", "Until", "After", "Tick", "NewTimer", "NewTicker":
		return true
	}
	return false
}

func nondeterministic(f *types.Func) bool {
	if f.Pkg() == nil {
		return false
	}
	switch path := f.Pkg().Path(); path {
	case "time":
		return isClockRead(f)
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
// through functions declared in the package, and, when facts is set,
// through functions of other packages of the module that carry a
// readsClock fact.
type chains struct {
	pass  *analysis.Pass
	pred  func(*types.Func) bool
	facts bool
	// local holds, per function declared in the package, the names of
	// the calls from it to a pred function (starting with its own name),
	// or nil when it reaches none.
	local map[*types.Func][]string
}

// declared is a function of the package with a body.
type declared struct {
	fn   *types.Func
	body inspector.Cursor
}

// ref is a call of a function, or a use of it as a value.
type ref struct {
	fn       *types.Func
	pos, end token.Pos
}

// newChains solves which declared functions reach pred. It iterates to a
// fixed point over the call graph in source order, so a cycle (odd calls
// even calls odd) is solved whichever function is looked at first, and
// the chains are the same on every run.
func newChains(pass *analysis.Pass, decls []declared, pred func(*types.Func) bool, facts bool) *chains {
	c := &chains{pass: pass, pred: pred, facts: facts, local: map[*types.Func][]string{}}
	refs := make([][]ref, len(decls))
	for i, d := range decls {
		refs[i] = refsIn(pass.TypesInfo, d.body)
	}
	for changed := true; changed; {
		changed = false
		for i, d := range decls {
			if c.local[d.fn] != nil {
				continue
			}
			for _, r := range refs[i] {
				if chain := c.chain(r.fn); chain != nil {
					c.local[d.fn] = append([]string{d.fn.Name()}, chain...)
					changed = true
					break
				}
			}
		}
	}
	return c
}

// chain returns the names of the calls from f to a pred function, or nil.
func (c *chains) chain(f *types.Func) []string {
	switch {
	case c.pred(f):
		return []string{f.Pkg().Name() + "." + f.Name()}
	case f.Pkg() == c.pass.Pkg:
		return c.local[f]
	case c.facts && f.Pkg() != nil && sameModule(c.pass, f.Pkg()) && !strings.HasPrefix(f.Pkg().Path(), belfryRuntime):
		var fact readsClock
		if c.pass.ImportObjectFact(f, &fact) {
			return append([]string{f.Pkg().Name() + "." + f.Name()}, fact.Chain...)
		}
	}
	return nil
}

// belfryRuntime is the tree of belfry's runtime packages, which read the
// clock for their own bookkeeping (a checkpoint's deadline, a lease), not
// to choose a handler's period: inside belfry's own module (its example
// service) a call into them is a library call, as it is from any other.
const belfryRuntime = "github.com/belfry/belfry/runtime/"

func sameModule(pass *analysis.Pass, pkg *types.Package) bool {
	mod := pass.Module.Path
	return pkg.Path() == mod || strings.HasPrefix(pkg.Path(), mod+"/")
}

// each calls report for every reference under cur to a function that
// reaches pred, with the chain and the range of the reference.
func (c *chains) each(cur inspector.Cursor, report func(chain []string, pos, end token.Pos)) {
	for _, r := range refsIn(c.pass.TypesInfo, cur) {
		if chain := c.chain(r.fn); chain != nil {
			report(chain, r.pos, r.end)
		}
	}
}

// refsIn lists, in source order, the static calls under cur (at the
// call) and the uses of a function as a value (clock := time.Now, at
// the reference). Calls through interfaces and func values are not
// followed: their callee is not known here.
func refsIn(info *types.Info, cur inspector.Cursor) []ref {
	var refs []ref
	for n := range cur.Preorder((*ast.CallExpr)(nil), (*ast.Ident)(nil)) {
		switch node := n.Node().(type) {
		case *ast.CallExpr:
			if f := typeutil.StaticCallee(info, node); f != nil {
				refs = append(refs, ref{f.Origin(), node.Pos(), node.End()})
			}
		case *ast.Ident:
			f, ok := info.Uses[node].(*types.Func)
			if !ok {
				continue
			}
			if at, called := reference(n); !called {
				refs = append(refs, ref{f.Origin(), at.Pos(), at.End()})
			}
		}
	}
	return refs
}

// reference climbs from an identifier to the expression that names the
// function (pkg.F, x.M, F[T], (F)) and reports whether that expression is
// the callee of a call.
func reference(id inspector.Cursor) (ast.Node, bool) {
	cur := id
	for {
		switch cur.ParentEdgeKind() {
		case edge.SelectorExpr_Sel, edge.IndexExpr_X, edge.IndexListExpr_X, edge.ParenExpr_X:
			cur = cur.Parent()
			continue
		case edge.CallExpr_Fun:
			return cur.Node(), true
		}
		return cur.Node(), false
	}
}

// initializer returns the cursor of the expression a package-level
// variable is initialised with.
func initializer(insp *inspector.Inspector, pass *analysis.Pass, v *types.Var) (inspector.Cursor, bool) {
	for cur := range insp.Root().Preorder((*ast.ValueSpec)(nil)) {
		vs := cur.Node().(*ast.ValueSpec)
		for i, name := range vs.Names {
			if pass.TypesInfo.Defs[name] != v {
				continue
			}
			switch {
			case len(vs.Values) == len(vs.Names):
				return cur.ChildAt(edge.ValueSpec_Values, i), true
			case len(vs.Values) == 1:
				return cur.ChildAt(edge.ValueSpec_Values, 0), true
			}
			return inspector.Cursor{}, false
		}
	}
	return inspector.Cursor{}, false
}
