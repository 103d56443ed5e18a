package runtime

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

// Forget deletes a schedule's counters by name (everyCounter), so a counter
// or an outcome declared later without joining that list would outlive
// Forget, and its schedule would be listed as removed for ever. Every
// constant of type Outcome and every counter… constant in the package's
// source must be in it.
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
					if !slices.Contains(everyCounter, value) {
						t.Errorf("%s: %s = %q is not in everyCounter: Forget would leave it", fset.Position(name.Pos()), name.Name, value)
					}
				}
			}
		}
	}
	if found < len(counterFields) {
		t.Fatalf("found %d counter and outcome constants, fewer than the %d counterFields: the search is broken", found, len(counterFields))
	}
}

// The scripts keep a schedule's counters in one value laid out by
// store.CounterLayout and ignore a name outside it, so a counter declared
// without a place there would never be counted.
func TestEveryCounterHasAPlaceInTheStoredValue(t *testing.T) {
	for _, c := range everyCounter {
		if !store.CounterKnown(c) {
			t.Errorf("counter %q is not in store.CounterLayout: its counts would be dropped", c)
		}
	}
}
