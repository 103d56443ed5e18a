// Package testmod turns a txtar archive into a module that imports the
// real github.com/belfry/belfry, for analysistest in module mode.
//
// An archive holds a go.mod (module path and go version only) and the
// packages under test. Extract appends a replace directive pointing at
// this checkout and copies its go.sum, so the testdata can never drift
// from the registry the analyzers use, and nothing is fetched.
package testmod

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/tools/txtar"
)

// Root is the directory of the belfry checkout this package belongs to.
func Root(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("testmod: no caller information")
	}
	// file is <root>/analyzer/internal/testmod/testmod.go.
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// Extract writes the archive at path into a temporary directory and
// returns it, ready for analysistest.Run(t, dir, a, "./...").
func Extract(t testing.TB, path string) string {
	t.Helper()
	ar, err := txtar.ParseFile(path)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, f := range ar.Files {
		files[f.Name] = string(f.Data)
	}
	return Write(t, files)
}

// Write writes a module of files (slash-separated names to contents, a
// go.mod among them) into a temporary directory and returns it.
func Write(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	root := Root(t)
	for name, data := range files {
		if name == "go.mod" {
			if !strings.Contains(data, "github.com/belfry/belfry") {
				t.Fatal("testmod: go.mod must require github.com/belfry/belfry")
			}
			data += "\nreplace github.com/belfry/belfry => " + root + "\n"
		}
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644); err != nil {
		t.Fatal(err)
	}
	// The go.mod lists only belfry; let the go command add the
	// requirements it implies instead of failing on them.
	t.Setenv("GOFLAGS", "-mod=mod")
	return dir
}
