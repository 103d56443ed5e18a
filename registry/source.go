package registry

import (
	"context"
	"fmt"
	"go/ast"
	"go/types"
)

// Found is one //cron: directive found in a Go file.
type Found struct {
	Comment *ast.Comment
	// Func is the top-level function or method whose doc comment holds
	// the directive, or nil when the directive is anywhere else.
	Func      *ast.FuncDecl
	Directive *Directive // nil when Err is set
	// Errs is every problem of the directive, in position order; Err is
	// the first of them.
	Errs PosErrors
	Err  *PosError
}

// FindDirectives returns every //cron: directive in f, in source order,
// including those that are misplaced (Func == nil) or invalid (Err != nil).
// It scans all comments, not only doc comments, so that a directive in the
// wrong place is reported instead of silently ignored.
func FindDirectives(f *ast.File) []Found {
	owner := map[*ast.Comment]*ast.FuncDecl{}
	for _, decl := range f.Decls {
		if fn, ok := decl.(*ast.FuncDecl); ok && fn.Doc != nil {
			for _, c := range fn.Doc.List {
				owner[c] = fn
			}
		}
	}
	var found []Found
	for _, group := range f.Comments {
		for _, c := range group.List {
			if !IsDirective(c.Text) {
				continue
			}
			fd := Found{Comment: c, Func: owner[c]}
			d, err := ParseDirective(c)
			if err != nil {
				fd.Errs = err.(PosErrors)
				fd.Err = fd.Errs[0]
			} else {
				fd.Directive = d
			}
			found = append(found, fd)
		}
	}
	return found
}

// MisplacedError is the message for a directive not in the doc comment of
// a top-level func or method.
func MisplacedError(fd Found) *PosError {
	if fd.Func != nil {
		return nil
	}
	return &PosError{fd.Comment.Slash, fd.Comment.End(), "a //cron:schedule directive must be in the doc comment of a top-level func; e.g. " + DirectiveExample + " directly above func Prune(ctx context.Context, occ registry.Occurrence) error, or above a method of a named type"}
}

// HandlerSignature is the signature a handler must have, as text.
const HandlerSignature = "func(context.Context, registry.Occurrence) error"

// CheckHandler reports whether fn's signature is a handler's: the
// HandlerFunc signature, or with payload != nil, the same with a third
// parameter to which a value of type payload is assignable. fn may be a
// method of a named, non-generic type declared in fn's package: the service
// supplies the receiver at start-up (generated NewRegistry).
func CheckHandler(fn *types.Func, payload types.Type) error {
	sig := fn.Type().(*types.Signature)
	want := HandlerSignature
	if payload != nil {
		want = fmt.Sprintf("func(context.Context, registry.Occurrence, %s) error", types.TypeString(payload, shortQualifier))
	}
	bad := func(why string) error {
		return fmt.Errorf("handler %s has signature %s; %s: want %s", fn.Name(), types.TypeString(sig, shortQualifier), why, want)
	}
	params, results := sig.Params(), sig.Results()
	nparams := 2
	if payload != nil {
		nparams = 3
	}
	switch {
	case sig.Recv() != nil && !isPlainReceiver(sig.Recv().Type()):
		return bad("the receiver must be a named, non-generic type T or *T")
	case sig.TypeParams().Len() > 0:
		return bad("generic functions cannot be handlers")
	case sig.Variadic() || params.Len() != nparams:
		if payload == nil && params.Len() == 3 {
			return bad("a third parameter needs payload=<package-level var>")
		}
		return bad(fmt.Sprintf("it takes %d parameters", params.Len()))
	case !isNamed(params.At(0).Type(), "context", "Context"):
		return bad("the first parameter must be context.Context")
	case !isNamed(params.At(1).Type(), ImportPath, "Occurrence"):
		return bad("the second parameter must be registry.Occurrence")
	case results.Len() != 1 || !types.Identical(results.At(0).Type(), types.Universe.Lookup("error").Type()):
		return bad("it must return exactly one error")
	case payload != nil && !types.AssignableTo(payload, params.At(2).Type()):
		return bad(fmt.Sprintf("the payload of type %s is not assignable to the third parameter", types.TypeString(payload, shortQualifier)))
	}
	return nil
}

// ImportPath is this package's import path, as generated code imports it.
const ImportPath = "github.com/belfry/belfry/registry"

// isPlainReceiver reports whether a method with receiver type t can be
// bound by generated code: T or *T for a named type without type
// parameters.
func isPlainReceiver(t types.Type) bool {
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	n, ok := types.Unalias(t).(*types.Named)
	return ok && n.TypeParams().Len() == 0
}

func isNamed(t types.Type, pkgPath, name string) bool {
	n, ok := types.Unalias(t).(*types.Named)
	if !ok {
		return false
	}
	obj := n.Obj()
	return obj.Name() == name && obj.Pkg() != nil && obj.Pkg().Path() == pkgPath
}

func shortQualifier(p *types.Package) string { return p.Name() }

// Wrap returns the schedule's handler wrapped by middleware, the first
// middleware outermost.
func (s *Schedule) Wrap(middleware ...Middleware) HandlerFunc {
	h := s.Handler
	for i := len(middleware) - 1; i >= 0; i-- {
		h = middleware[i](s, h)
	}
	return h
}

// HandlePayload decodes an occurrence from an asynq task payload and runs
// the wrapped handler. Generated RegisterHandlers functions call it, so the
// adapter from asynq lives here once instead of in every generated file.
func (s *Schedule) HandlePayload(ctx context.Context, payload []byte, middleware ...Middleware) error {
	occ, err := DecodeOccurrence(payload)
	if err != nil {
		return err
	}
	if occ.Schedule != s.Name {
		return fmt.Errorf("occurrence %s is for schedule %q, delivered to %q", occ.ID, occ.Schedule, s.Name)
	}
	return s.Wrap(middleware...)(ctx, occ)
}
