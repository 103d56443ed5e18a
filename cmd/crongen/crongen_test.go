package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rogpeppe/go-internal/testscript"
)

var update = flag.Bool("update", false, "rewrite the .golden files, and the files that scripts cmp against, with the current output")

// TestMain lets the test binary run as the crongen command of the scripts
// under testdata/script.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){"crongen": main})
}

// repoRoot is the root of the belfry module, which temporary modules
// replace github.com/belfry/belfry with.
func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repository root not found from the test's directory: %v", err)
	}
	return root
}

func fixture(t testing.TB, name string) string {
	return filepath.Join(repoRoot(t), "testdata", "crongen", name)
}

// goModule is the go.mod of a temporary module that uses this checkout of
// belfry.
func goModule(root string) string {
	return "module example.com/e2e\n\ngo 1.26\n\nrequire github.com/belfry/belfry v0.0.0\n\nreplace github.com/belfry/belfry => " + root + "\n"
}

// moduleEnv lets the go command complete a temporary module's requirements
// from this checkout's go.sum; modules missing from the cache (a fresh
// machine) come through the environment's GOPROXY like any build's.
func moduleEnv() []string {
	return append(os.Environ(), "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local", "GOWORK=off")
}

// tempModule creates a module example.com/e2e holding copies of the named
// fixture packages (their .go files) as top-level packages.
func tempModule(t *testing.T, packages ...string) string {
	t.Helper()
	root := repoRoot(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "go.mod"), goModule(root))
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "go.sum"), string(sum))
	for _, p := range packages {
		entries, err := os.ReadDir(fixture(t, p))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if !strings.HasSuffix(e.Name(), ".go") {
				continue
			}
			src, err := os.ReadFile(filepath.Join(fixture(t, p), e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(dir, p, e.Name()), string(src))
		}
	}
	return dir
}

func writeFile(t testing.TB, name, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(content), 0o666); err != nil {
		t.Fatal(err)
	}
}

func readFile(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// checkGolden compares got with the golden file, or rewrites it with -update.
func checkGolden(t *testing.T, golden, got string) {
	t.Helper()
	if *update {
		writeFile(t, golden, got)
		return
	}
	want := readFile(t, golden)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", filepath.Base(golden), diff)
	}
}
