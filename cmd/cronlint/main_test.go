package main_test

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// buildCronlint builds the command once per test binary run.
func buildCronlint(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds cronlint and runs the go command")
	}
	bin := filepath.Join(t.TempDir(), "cronlint")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// TestVet builds cronlint and runs it through go vet -vettool over a
// module with a clean and a dirty package, as CI would. A clock read in a
// helper package reaches the handler through a fact, which go vet passes
// between packages in its own files.
func TestVet(t *testing.T) {
	bin := buildCronlint(t)
	mod := newModule(t, repoRoot(t))

	out, code := run(t, mod, "go", "vet", "-vettool="+bin, "./...")
	if code != 1 {
		t.Errorf("go vet ./... exited %d, want 1; output:\n%s", code, out)
	}
	want := []string{
		`dirty/dirty.go:12:1: "// cron:" has a space after //`,
		`dirty/dirty.go:15:42: unknown key "colour"`,
		`dirty/dirty.go:18:1: package dirty has //cron:schedule directives but no zz_generated.cron.go;`,
		`dirty/dirty.go:21:17: schedule "midnight-b" fires at 00:00 UTC, midnight, with "cleanup", "midnight-a" and "midnight-c"`,
		`dirty/dirty.go:24:17: schedule "midnight-c" fires at 00:00 UTC`,
		`dirty/dirty.go:24:48: note: "midnight-c" runs on Europe/London time; to keep a local zone on purpose, add //cronlint:ignore zone <reason>`,
		`dirty/dirty.go:27:42: "dst" hits DST in America/New_York: 01:30 happens twice on 2026-11-01`,
		`dirty/dirty.go:32:6: handler Stale reads the clock (time.Now)`,
		`dirty/dirty.go:36:42: timeout=15m is longer than the shortest gap between runs of "slow", 10m`,
		`dirty/dirty.go:37:32: handler Slow discards its occurrence`,
		`dirty/dirty.go:51:6: handler ViaHelper reads the clock (clock.Yesterday → time.Now)`,
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
	for _, l := range lines {
		if len(l) > 300 {
			t.Errorf("diagnostic of %d bytes, want one short line: %s", len(l), l)
		}
	}

	if out, code := run(t, mod, "go", "vet", "-vettool="+bin, "./jobs"); code != 0 || strings.TrimSpace(out) != "" {
		t.Errorf("go vet ./jobs exited %d with output %q; want a clean package to pass silently", code, out)
	}
}

// TestFixChangesOnlyReportedLines runs cronlint, then cronlint -fix, and
// checks that every line -fix changed carries a diagnostic of the first
// run; in particular the @hourly schedule that meets the midnight jobs is
// not rewritten, while the midnight crowd is spread.
func TestFixChangesOnlyReportedLines(t *testing.T) {
	bin := buildCronlint(t)
	mod := newModule(t, repoRoot(t))
	file := filepath.Join(mod, "dirty", "dirty.go")
	before, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := run(t, mod, bin, "./dirty")
	reported := map[int]bool{}
	for _, l := range diagnostics(out) {
		// dir/dirty/dirty.go:21:17: message
		parts := strings.SplitN(l, ":", 4)
		if len(parts) < 4 {
			t.Fatalf("not a file:line:col diagnostic: %q", l)
		}
		n, err := strconv.Atoi(parts[1])
		if err != nil {
			t.Fatalf("bad line in %q", l)
		}
		reported[n] = true
	}

	run(t, mod, bin, "-fix", "./dirty")
	after, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	old, fixed := strings.Split(string(before), "\n"), strings.Split(string(after), "\n")
	if len(old) != len(fixed) {
		t.Fatalf("-fix changed the number of lines from %d to %d:\n%s", len(old), len(fixed), after)
	}
	changed := 0
	for i := range old {
		if old[i] != fixed[i] {
			changed++
			if !reported[i+1] {
				t.Errorf("-fix changed line %d, which has no diagnostic:\n-%s\n+%s", i+1, old[i], fixed[i])
			}
		}
	}
	for _, w := range []string{
		`//cron:schedule "5 4 * * *" name=spaced`,
		`//cron:schedule "0 0 * * *" name=midnight-a` + "\n",
		`//cron:schedule "43 0 * * *" name=midnight-b`,
		`//cron:schedule "@hourly" name=cleanup` + "\n",
		`//cron:schedule "*/10 * * * *" name=slow timeout=15m overlap=skip`,
		`//cron:schedule "*/10 * * * *" name=locked timeout=15m` + "\n",
	} {
		if !strings.Contains(string(after), w) {
			t.Errorf("after cronlint -fix, dirty.go lacks %q:\n%s", w, after)
		}
	}
	if changed != 4 {
		t.Errorf("-fix changed %d lines, want 4 (spaced, midnight-b, midnight-c, slow)", changed)
	}
	if out, _ := run(t, mod, bin, "-pileup", "./dirty"); strings.TrimSpace(out) != "" {
		t.Errorf("after -fix, pileup still reports:\n%s", out)
	}
}

// TestFixReportsWhatRemains: cronlint -fix applies the fixes it has and
// then reports what it could not fix, exiting 3 as a run without -fix
// does. x/tools' -fix alone prints nothing and exits 0, which reads as
// "all fixed" while an unknown key or zone is still in the directive.
func TestFixReportsWhatRemains(t *testing.T) {
	bin := buildCronlint(t)
	mod := newModule(t, repoRoot(t))
	out, code := run(t, mod, bin, "-fix", "./dirty")
	if code != 3 {
		t.Errorf("cronlint -fix ./dirty exited %d, want 3 (findings remain); output:\n%s", code, out)
	}
	// Standalone, cronlint names files by their absolute path.
	if !strings.Contains(out, `/dirty/dirty.go:15:42: unknown key "colour"`) {
		t.Errorf("cronlint -fix does not report the unknown key it cannot fix:\n%s", out)
	}
	if strings.Contains(out, `schedule "midnight-c" fires at 00:00 UTC`) {
		t.Errorf("cronlint -fix reports the pile-up it fixed:\n%s", out)
	}
	if out, code := run(t, mod, bin, "-fix", "./jobs"); code != 0 || strings.TrimSpace(out) != "" {
		t.Errorf("cronlint -fix ./jobs exited %d with output %q; want a clean package to pass silently", code, out)
	}
}

// TestHelp checks that cronlint help <check> shows the check's doc.go:
// its title and its WRONG and RIGHT examples.
func TestHelp(t *testing.T) {
	bin := buildCronlint(t)
	for _, check := range checks {
		out, code := run(t, t.TempDir(), bin, "help", check)
		if code != 0 {
			t.Errorf("cronlint help %s exited %d:\n%s", check, code, out)
		}
		for _, w := range []string{check + ": ", "WRONG", "RIGHT", "//cron:schedule"} {
			if !strings.Contains(out, w) {
				t.Errorf("cronlint help %s lacks %q:\n%s", check, w, out)
			}
		}
	}
}

var checks = []string{"directive", "idempotent", "overlap", "pileup", "stale", "zone"}

// TestHelpTellsHowToRunCronlint checks that cronlint help and -h describe
// belfry's way of running it (the README's commands, the checks, -fix and
// suppression) rather than x/tools' generic text, which sends the reader
// to go fix -fixtool; and that usage mistakes get one line and exit 2
// while the go vet protocol (-V=full, -flags) still answers.
func TestHelpTellsHowToRunCronlint(t *testing.T) {
	bin := buildCronlint(t)
	dir := t.TempDir()
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}, {"-help", "./..."}} {
		out, code := run(t, dir, bin, args...)
		if code != 0 {
			t.Errorf("cronlint %s exited %d:\n%s", strings.Join(args, " "), code, out)
		}
		want := []string{
			"go vet -vettool=$(go tool -n cronlint) ./...", "go tool cronlint [flags] ./...", "go tool cronlint -fix ./...",
			"run go generate", "cronlint help CHECK", "-pileup.threshold int", "//cronlint:ignore CHECK REASON",
			"go mod edit -tool github.com/belfry/belfry/cmd/cronlint",
		}
		for _, check := range checks {
			want = append(want, "\n  "+check+" ")
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("cronlint %s lacks %q:\n%s", strings.Join(args, " "), w, out)
			}
		}
		// belfry is not on the module proxy, so go get -tool fails; the
		// README adds the tool with go mod edit -tool.
		for _, wrong := range []string{"fixtool", "go fix", "PROGRAM", "go get"} {
			if strings.Contains(out, wrong) {
				t.Errorf("cronlint %s mentions %q, which is not how belfry runs cronlint:\n%s", strings.Join(args, " "), wrong, out)
			}
		}
	}

	for _, args := range [][]string{{}, {"-bogus", "./..."}, {"help", "nope"}, {"-fix"}, {"-pileup.threshold=2", "-json"}} {
		out, code := run(t, dir, bin, args...)
		if code != 2 || strings.Count(out, "\n") != 1 || !strings.Contains(out, "cronlint") {
			t.Errorf("cronlint %s exited %d with %q; want one line naming cronlint and exit 2", strings.Join(args, " "), code, out)
		}
	}

	if out, code := run(t, dir, bin, "-V=full"); code != 0 || !strings.Contains(out, "version") {
		t.Errorf("cronlint -V=full exited %d with %q; go vet needs a version line", code, out)
	}
	out, code := run(t, dir, bin, "-flags")
	var flags []struct{ Name string }
	if err := json.Unmarshal([]byte(out), &flags); code != 0 || err != nil {
		t.Fatalf("cronlint -flags exited %d with %v:\n%s", code, err, out)
	}
	if !slices.ContainsFunc(flags, func(f struct{ Name string }) bool { return f.Name == "pileup.threshold" }) {
		t.Errorf("cronlint -flags lacks pileup.threshold:\n%s", out)
	}
}

// TestVetFailsOnStaleGeneratedFile is the forgotten go generate: a
// directive changed from */2 to */5 after crongen ran compiles, and go vet
// with cronlint must fail on it until crongen runs again.
func TestVetFailsOnStaleGeneratedFile(t *testing.T) {
	bin := buildCronlint(t)
	crongen := filepath.Join(t.TempDir(), "crongen")
	if out, err := exec.Command("go", "build", "-o", crongen, "../crongen").CombinedOutput(); err != nil {
		t.Fatalf("go build crongen: %v\n%s", err, out)
	}
	mod := newEmptyModule(t, repoRoot(t))
	file := filepath.Join(mod, "tick", "tick.go")
	src := `package tick

import (
	"context"
	"log/slog"

	"github.com/belfry/belfry/registry"
)

//go:generate go tool crongen

//cron:schedule "*/2 * * * *" name=tick timeout=1m
func Tick(ctx context.Context, occ registry.Occurrence) error {
	slog.InfoContext(ctx, "tick", "key", occ.Key())
	return nil
}
`
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	generate := func() {
		t.Helper()
		if out, code := run(t, mod, crongen, "generate", "./..."); code != 0 {
			t.Fatalf("crongen exited %d:\n%s", code, out)
		}
	}
	generate()
	if out, code := run(t, mod, "go", "vet", "-vettool="+bin, "./..."); code != 0 {
		t.Fatalf("go vet on a fresh generated file exited %d:\n%s", code, out)
	}

	if err := os.WriteFile(file, []byte(strings.Replace(src, "*/2", "*/5", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code := run(t, mod, "go", "build", "./..."); code != 0 {
		t.Fatalf("go build exited %d; the reproducer needs a stale file that compiles:\n%s", code, out)
	}
	out, code := run(t, mod, "go", "vet", "-vettool="+bin, "./...")
	want := `tick/tick.go:12:17: zz_generated.cron.go has "*/2 * * * *" for "tick"; run go generate`
	if code == 0 || !slices.Contains(diagnostics(out), want) {
		t.Errorf("go vet after */2 -> */5 exited %d, want non-zero with\n%s\ngot:\n%s", code, want, out)
	}

	generate()
	if out, code := run(t, mod, "go", "vet", "-vettool="+bin, "./..."); code != 0 {
		t.Errorf("go vet after go generate exited %d:\n%s", code, out)
	}
}

// newEmptyModule writes a module that requires belfry from root and holds
// no package yet.
func newEmptyModule(t *testing.T, root string) string {
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
	return dir
}

// newModule writes a module that requires belfry from root; go.sum comes
// from root, so only modules missing from the cache are fetched.
func newModule(t *testing.T, root string) string {
	t.Helper()
	dir := newEmptyModule(t, root)
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
