package registry

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"reflect"
	"strings"
	"testing"
)

// stubImporter serves small stand-ins for context and this package, so that
// handler snippets type-check in microseconds without export data.
type stubImporter map[string]*types.Package

func (s stubImporter) Import(path string) (*types.Package, error) {
	if p, ok := s[path]; ok {
		return p, nil
	}
	return nil, fmt.Errorf("stub importer: no package %q", path)
}

func checkStub(t *testing.T, fset *token.FileSet, path, src string, imp types.Importer) *types.Package {
	t.Helper()
	f, err := parser.ParseFile(fset, path+".go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	pkg, err := (&types.Config{Importer: imp}).Check(path, fset, []*ast.File{f}, nil)
	if err != nil {
		t.Fatalf("type-checking %s: %v", path, err)
	}
	return pkg
}

// typeCheckHandlers type-checks src (package jobs) and returns its package.
func typeCheckHandlers(t *testing.T, src string) *types.Package {
	t.Helper()
	fset := token.NewFileSet()
	stubs := stubImporter{}
	stubs["context"] = checkStub(t, fset, "context", "package context\ntype Context interface{ Done() <-chan struct{} }\n", stubs)
	stubs[ImportPath] = checkStub(t, fset, ImportPath, "package registry\ntype Occurrence struct{ Schedule string }\n", stubs)
	stubs["other/registry"] = checkStub(t, fset, "other/registry", "package registry\ntype Occurrence struct{ Schedule string }\n", stubs)
	return checkStub(t, fset, "example.com/jobs", src, stubs)
}

func TestCheckHandler(t *testing.T) {
	t.Parallel()
	pkg := typeCheckHandlers(t, `package jobs

import (
	"context"
	"github.com/belfry/belfry/registry"
	other "other/registry"
)

type Config struct{ Limit int }
type Ctx = context.Context
type myError interface{ error }

var cfg Config

func Good(ctx context.Context, occ registry.Occurrence) error { return nil }
func Aliased(ctx Ctx, occ registry.Occurrence) error         { return nil }
func WithPayload(ctx context.Context, occ registry.Occurrence, c Config) error { return nil }
func WithPointer(ctx context.Context, occ registry.Occurrence, c *Config) error { return nil }
func WithAny(ctx context.Context, occ registry.Occurrence, c any) error { return nil }
func OneParam(ctx context.Context) error { return nil }
func NoResult(ctx context.Context, occ registry.Occurrence) {}
func TwoResults(ctx context.Context, occ registry.Occurrence) (int, error) { return 0, nil }
func NamedError(ctx context.Context, occ registry.Occurrence) myError { return nil }
func OccPointer(ctx context.Context, occ *registry.Occurrence) error { return nil }
func OtherOcc(ctx context.Context, occ other.Occurrence) error { return nil }
func Swapped(occ registry.Occurrence, ctx context.Context) error { return nil }
func Variadic(ctx context.Context, occ ...registry.Occurrence) error { return nil }
func Generic[T any](ctx context.Context, occ registry.Occurrence) error { return nil }

type Jobs struct{}

func (Jobs) Method(ctx context.Context, occ registry.Occurrence) error { return nil }
func (*Jobs) PointerMethod(ctx context.Context, occ registry.Occurrence) error { return nil }
func (*Jobs) BadMethod(ctx context.Context) error { return nil }

type Box[T any] struct{}

func (*Box[T]) GenericRecv(ctx context.Context, occ registry.Occurrence) error { return nil }
`)
	config := pkg.Scope().Lookup("Config").Type()
	methodOf := func(typeName, name string) *types.Func {
		obj, _, _ := types.LookupFieldOrMethod(types.NewPointer(pkg.Scope().Lookup(typeName).Type()), false, pkg, name)
		return obj.(*types.Func)
	}
	tests := []struct {
		fn      string
		payload types.Type
		wantErr string // empty for a valid handler
	}{
		{"Good", nil, ""},
		{"Aliased", nil, ""},
		{"WithPayload", config, ""},
		{"WithAny", config, ""},
		{"WithPayload", nil, "a third parameter needs payload=<package-level var>"},
		{"WithPointer", config, "the payload of type jobs.Config is not assignable to the third parameter"},
		{"Good", config, "it takes 2 parameters"},
		{"OneParam", nil, "it takes 1 parameters"},
		{"NoResult", nil, "it must return exactly one error"},
		{"TwoResults", nil, "it must return exactly one error"},
		{"NamedError", nil, "it must return exactly one error"},
		{"OccPointer", nil, "the second parameter must be registry.Occurrence"},
		{"OtherOcc", nil, "the second parameter must be registry.Occurrence"},
		{"Swapped", nil, "the first parameter must be context.Context"},
		{"Variadic", nil, "it takes 2 parameters"},
		{"Generic", nil, "generic functions cannot be handlers"},
		{"Method", nil, ""},
		{"PointerMethod", nil, ""},
		{"BadMethod", nil, "it takes 1 parameters"},
		{"GenericRecv", nil, "the receiver must be a named, non-generic type"},
	}
	for _, tt := range tests {
		var fn *types.Func
		switch tt.fn {
		case "Method", "PointerMethod", "BadMethod":
			fn = methodOf("Jobs", tt.fn)
		case "GenericRecv":
			fn = methodOf("Box", tt.fn)
		default:
			fn = pkg.Scope().Lookup(tt.fn).(*types.Func)
		}
		err := CheckHandler(fn, tt.payload)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("CheckHandler(%s, %v): %v", tt.fn, tt.payload, err)
		case tt.wantErr != "" && err == nil:
			t.Errorf("CheckHandler(%s, %v) = nil, want %q", tt.fn, tt.payload, tt.wantErr)
		case err != nil:
			want := HandlerSignature
			if tt.payload != nil {
				want = "func(context.Context, registry.Occurrence, jobs.Config) error"
			}
			if !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "want "+want) || !strings.Contains(err.Error(), "handler "+tt.fn) {
				t.Errorf("CheckHandler(%s, %v) = %q, want it to contain %q, the handler's name and \"want %s\"", tt.fn, tt.payload, err, tt.wantErr, want)
			}
		}
	}
}

// TestRegistryPath ties the stub above to the real package: CheckHandler
// recognises Occurrence by this import path.
func TestRegistryPath(t *testing.T) {
	t.Parallel()
	if got := reflect.TypeFor[Occurrence]().PkgPath(); got != ImportPath {
		t.Errorf("ImportPath = %q, but Occurrence is declared in %q", ImportPath, got)
	}
}

func TestFindDirectives(t *testing.T) {
	t.Parallel()
	src := `package jobs

// Prune removes old rows.
//
//cron:schedule "17 3 * * *" name=prune
func Prune(ctx context.Context, occ registry.Occurrence) error { return nil }

//cron:schedule "0 * * * *"
type T struct{}

//cron:schedule "0 0 * * *"
func (T) Method(ctx context.Context, occ registry.Occurrence) error { return nil }

// Bad has a bad expression.
//cron:schedule "17 25 * * *"
func Bad(ctx context.Context, occ registry.Occurrence) error {
	//cron:schedule "0 1 * * *"
	return nil
}

// cron:schedule "0 2 * * *"
func Spaced() {}

//cron:nope
func Unknown() {}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "jobs.go", src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	found := FindDirectives(f)
	type summary struct {
		line      int
		fn        string
		ok        bool
		misplaced string
	}
	var got []summary
	for _, fd := range found {
		s := summary{line: fset.Position(fd.Comment.Slash).Line, ok: fd.Err == nil && fd.Directive != nil}
		if fd.Func != nil {
			s.fn = fd.Func.Name.Name
		}
		if (fd.Err == nil) == (fd.Directive == nil) {
			t.Errorf("line %d: exactly one of Directive and Err must be set: %+v", s.line, fd)
		}
		if e := MisplacedError(fd); e != nil {
			s.misplaced = e.Msg
			if e.Pos != fd.Comment.Slash || e.End != fd.Comment.End() {
				t.Errorf("line %d: misplaced error not on the comment", s.line)
			}
		}
		got = append(got, s)
	}
	want := []summary{
		{5, "Prune", true, ""},
		{8, "", true, "must be in the doc comment of a top-level func"},
		{11, "Method", true, ""},
		{15, "Bad", false, ""},
		{17, "", true, "must be in the doc comment of a top-level func"},
		{24, "Unknown", false, ""},
	}
	if len(got) != len(want) {
		t.Fatalf("found %d directives, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.line != w.line || g.fn != w.fn || g.ok != w.ok || (w.misplaced == "") != (g.misplaced == "") || !strings.Contains(g.misplaced, w.misplaced) {
			t.Errorf("directive %d: got %+v, want %+v", i, g, w)
		}
	}
	if d := found[0].Directive; d == nil || d.Name != "prune" {
		t.Errorf("first directive: %+v", found[0].Directive)
	}
	if e := found[3].Err; e == nil || fset.Position(e.Pos).Column != 21 {
		t.Errorf("bad expression error %v, want it at the hour field, column 21", e)
	}
}
