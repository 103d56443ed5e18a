package core

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/belfry/belfry/runtime/internal/store"
)

// A schedule's counters are one value laid out by store.CounterLayout, and
// the scripts ignore a name outside it; Forget deletes old-layout counters
// by its names. So a counter or an outcome declared later without joining
// that list would never be counted, or would outlive Forget and its
// schedule be listed as removed for ever. Every constant of type Outcome
// and every counter… constant in the package's source must be in it.
func TestEveryCounterNamesEachCounterAndOutcome(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	found := 0
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.CONST {
				continue
			}
			for _, spec := range gen.Specs {
				vs := spec.(*ast.ValueSpec)
				typ, _ := vs.Type.(*ast.Ident)
				for i, name := range vs.Names {
					isOutcome := typ != nil && typ.Name == "Outcome"
					if (!isOutcome && !strings.HasPrefix(name.Name, "counter")) || i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					value, _ := strconv.Unquote(lit.Value)
					found++
					if !slices.Contains(store.CounterLayout, value) {
						t.Errorf("%s: %s = %q is not in store.CounterLayout: it would not be counted, and Forget would leave it", fset.Position(name.Pos()), name.Name, value)
					}
				}
			}
		}
	}
	if found < len(counterFields) {
		t.Fatalf("found %d counter and outcome constants, fewer than the %d counterFields: the search is broken", found, len(counterFields))
	}
}
