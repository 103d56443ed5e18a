package main_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestVet builds cronlint and runs it through go vet -vettool over a
// module with a clean and a dirty package, as CI would.
func TestVet(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cronlint and runs go vet")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "cronlint")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	mod := newModule(t, root)

	out, code := run(t, mod, "go", "vet", "-vettool="+bin, "-zone.now=2026-01-01T00:00:00Z", "./...")
	if code != 1 {
		t.Errorf("go vet ./... exited %d, want 1; output:\n%s", code, out)
	}
	want := []string{
		`dirty/dirty.go:10:1: "// cron:" has a space after //`,
		`dirty/dirty.go:13:42: unknown key "colour"`,
		`dirty/dirty.go:16:17: schedule "midnight-a" fires in the same minute as "midnight-b" and "midnight-c" (00:00 UTC`,
		`dirty/dirty.go:19:17: schedule "midnight-b" fires in the same minute`,
		`dirty/dirty.go:22:17: schedule "midnight-c" fires in the same minute`,
		`dirty/dirty.go:22:48: schedule "midnight-c" runs in Europe/London; schedule in UTC`,
		`dirty/dirty.go:25:42: schedule "dst" runs at wall times in America/New_York that daylight saving time breaks: 01:30 happens twice on 2026-11-01`,
		`dirty/dirty.go:30:6: handler Stale calls time.Now`,
		`dirty/dirty.go:34:42: timeout=15m is longer than the shortest gap between two occurrences of "slow" (10m`,
		`dirty/dirty.go:35:32: handler Slow discards its occurrence`,
	}
	lines := diagnostics(out)
	for _, w := range want {
		if !containsPrefix(lines, w) {
			t.Errorf("go vet output lacks %q", w)
		}
	}
	if len(lines) != len(want) {
		t.Errorf("go vet reported %d diagnostics, want %d:\n%s", len(lines), len(want), strings.Join(lines, "\n"))
	}

	if out, code := run(t, mod, "go", "vet", "-vettool="+bin, "./jobs"); code != 0 || strings.TrimSpace(out) != "" {
		t.Errorf("go vet ./jobs exited %d with output %q; want a clean package to pass silently", code, out)
	}

	// Standalone, the same binary applies the suggested fixes.
	run(t, mod, bin, "-fix", "./dirty")
	fixed, err := os.ReadFile(filepath.Join(mod, "dirty", "dirty.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{
		`//cron:schedule "5 4 * * *" name=spaced`,
		`//cron:schedule "18 0 * * *" name=midnight-a`,
		`//cron:schedule "*/10 * * * *" name=slow timeout=15m overlap=skip`,
		`//cron:schedule "*/10 * * * *" name=locked timeout=15m` + "\n",
	} {
		if !strings.Contains(string(fixed), w) {
			t.Errorf("after cronlint -fix, dirty.go lacks %q:\n%s", w, fixed)
		}
	}
}

// newModule writes a module that requires belfry from root; go.sum comes
// from root, so only modules missing from the cache are fetched.
func newModule(t *testing.T, root string) string {
	t.Helper()
	dir := t.TempDir()
	gomod := "module example.com/svc\n\ngo 1.26.0\n\nrequire github.com/belfry/belfry v0.0.0\n\nreplace github.com/belfry/belfry => " + root + "\n"
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644); err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", "svc"))); err != nil {
		t.Fatal(err)
	}
	return dir
}

func run(t *testing.T, dir, name string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &exit):
		return string(out), exit.ExitCode()
	}
	t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	return "", -1
}

// diagnostics returns the file:line:col lines of vet output, without the
// "# package" headers.
func diagnostics(out string) []string {
	var lines []string
	for line := range strings.Lines(out) {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			lines = append(lines, line)
		}
	}
	return lines
}

func containsPrefix(lines []string, prefix string) bool {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}
