package core_test

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"strings"
	"testing"
)

// maxRuntimeMethods bounds what *Runtime exports, so its godoc stays a page
// a user reads: what a service calls and the operator's schedule actions.
// Anything else goes on the type named for what it serves (Families,
// Monitor, Leadership, Diagnostics), reached through an accessor.
const maxRuntimeMethods = 25

// TestRuntimeSurfaceStaysSmall reads the package's godoc (its non-test
// files, as go doc does) and fails when *Runtime exports more than
// maxRuntimeMethods methods, so the surface cannot grow back unnoticed.
func TestRuntimeSurfaceStaysSmall(t *testing.T) {
	t.Parallel()
	methods := runtimeMethods(t)
	if len(methods) > maxRuntimeMethods {
		t.Errorf("*Runtime exports %d methods, more than %d: put the new ones on the type that serves their reader (Families, Monitor, Leadership, Diagnostics) or a new one:\n%s",
			len(methods), maxRuntimeMethods, strings.Join(methods, "\n"))
	}
	for _, accessor := range []string{"Families", "Monitor", "Leadership", "Diagnostics"} {
		if !slices.Contains(methods, accessor) {
			t.Errorf("*Runtime has no %s accessor; exported methods:\n%s", accessor, strings.Join(methods, "\n"))
		}
	}
}

// runtimeMethods lists the exported methods go doc shows on Runtime.
func runtimeMethods(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, e.Name(), nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	p, err := doc.NewFromFiles(fset, files, "github.com/belfry/belfry/runtime/core")
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range p.Types {
		if typ.Name != "Runtime" {
			continue
		}
		var names []string
		for _, m := range typ.Methods {
			names = append(names, m.Name)
		}
		return names
	}
	t.Fatal("go doc shows no type Runtime")
	return nil
}
