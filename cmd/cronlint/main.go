// Command cronlint checks //cron:schedule directives, their handlers, and
// that the generated registry (zz_generated.cron.go) still matches them.
//
// It runs as a vet tool in CI (go vet -vettool=$(go tool -n cronlint) ./...)
// or standalone (go tool cronlint ./...); cronlint help lists the checks and
// flags, and cronlint help <check> shows what a check reports and why.
// -fix applies the suggested fixes, which rewrite only what is reported,
// and reports what remains; the generated registry holds the expressions,
// so run go generate afterwards. Each check can be silenced for one schedule with
// //cronlint:ignore <check> <reason> in the directive's doc comment.
//
// The go vet protocol (-V=full, -flags, a *.cfg argument) is
// multichecker's; only help, -h and a bare cronlint are answered here,
// because x/tools' generic help names go fix -fixtool, which is not how
// cronlint's fixes are applied.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/multichecker"

	"github.com/belfry/belfry/analyzer/directive"
	"github.com/belfry/belfry/analyzer/idempotent"
	"github.com/belfry/belfry/analyzer/overlap"
	"github.com/belfry/belfry/analyzer/pileup"
	"github.com/belfry/belfry/analyzer/stale"
	"github.com/belfry/belfry/analyzer/zone"
)

var analyzers = []*analysis.Analyzer{directive.Analyzer, pileup.Analyzer, zone.Analyzer, idempotent.Analyzer, overlap.Analyzer, stale.Analyzer}

const usageLine = "usage: cronlint [-fix] [-CHECK] packages (as go tool cronlint ./..., or go vet -vettool=$(go tool -n cronlint) ./...); cronlint help for more"

func main() {
	args := os.Args[1:]
	switch {
	case len(args) == 0:
		fmt.Fprintln(os.Stderr, usageLine)
		os.Exit(2)
	case len(args) == 1 && args[0] == "help":
		writeHelp(os.Stdout)
		return
	case args[0] == "help":
		for _, name := range args[1:] {
			if !slices.ContainsFunc(analyzers, func(a *analysis.Analyzer) bool { return a.Name == name }) {
				fmt.Fprintf(os.Stderr, "cronlint: unknown check %q; checks are %s\n", name, strings.Join(checkNames(), ", "))
				os.Exit(2)
			}
		}
	case !slices.ContainsFunc(args, isPackageOrStandaloneFlag):
		// Flags and no package (cronlint -fix): multichecker would print
		// its generic usage and exit 1. A flag's value given as a separate
		// argument (-c 3) looks like a package here and is left to it.
		fmt.Fprintln(os.Stderr, usageLine)
		os.Exit(2)
	}
	// The flag package calls Usage for -h, and for a bad flag after
	// writing what is wrong to its output; it then exits 0 or 2. A bad
	// flag is told in one line.
	var flagErr strings.Builder
	flag.CommandLine.SetOutput(&flagErr)
	flag.Usage = func() {
		if slices.ContainsFunc(args, isHelpFlag) {
			writeHelp(os.Stdout)
			return
		}
		fmt.Fprintf(os.Stderr, "cronlint: %s; cronlint help lists the flags\n", strings.TrimSpace(flagErr.String()))
	}
	if fixesToApply(args) {
		// x/tools' -fix writes the fixes, then prints nothing and exits 0
		// whatever it could not fix, which reads as "all fixed". A child
		// run with -fix applies them; this run, without -fix, reports what
		// remains and exits as a plain run does.
		if code := applyFixes(args); code != 0 {
			os.Exit(code)
		}
		os.Args = append(os.Args[:1], withoutFlag(args, "fix")...)
	}
	multichecker.Main(analyzers...)
}

// fixChildEnv marks the child run that applies the fixes, so that it does
// not start a child of its own.
const fixChildEnv = "CRONLINT_APPLYING_FIXES"

// fixesToApply reports whether args ask for fixes to be written: -fix
// without -diff (which prints them and writes nothing), in a run that is
// not the child applying them.
func fixesToApply(args []string) bool {
	return os.Getenv(fixChildEnv) == "" && boolFlag(args, "fix") && !boolFlag(args, "diff")
}

// applyFixes runs cronlint with args (-fix included) in a child process
// and returns its exit status.
func applyFixes(args []string) int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "cronlint:", err)
		return 1
	}
	cmd := exec.Command(self, args...)
	cmd.Env = append(os.Environ(), fixChildEnv+"=1")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode()
		}
		fmt.Fprintln(os.Stderr, "cronlint:", err)
		return 1
	}
	return 0
}

// boolFlag reports whether args set the boolean flag name (-name, --name,
// -name=true); a package argument never starts with a dash.
func boolFlag(args []string, name string) bool {
	set := false
	for _, arg := range args {
		if v, ok := flagValue(arg, name); ok {
			set, _ = strconv.ParseBool(v)
		}
	}
	return set
}

// withoutFlag returns args without any setting of the boolean flag name.
func withoutFlag(args []string, name string) []string {
	return slices.DeleteFunc(slices.Clone(args), func(arg string) bool {
		_, ok := flagValue(arg, name)
		return ok
	})
}

// flagValue returns the value arg gives the boolean flag name ("true" for
// a bare -name), and whether arg sets it at all.
func flagValue(arg, name string) (string, bool) {
	flagName, value, hasValue := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(arg, "-"), "-"), "=")
	if !strings.HasPrefix(arg, "-") || flagName != name {
		return "", false
	}
	if !hasValue {
		value = "true"
	}
	return value, true
}

// isPackageOrStandaloneFlag reports whether arg is a package (or go vet's
// *.cfg file), or a flag that needs none: go vet's protocol flags
// (-V=full, -flags) and the requests for help.
func isPackageOrStandaloneFlag(arg string) bool {
	return !strings.HasPrefix(arg, "-") || arg == "-V" || strings.HasPrefix(arg, "-V=") || arg == "-flags" || isHelpFlag(arg)
}

func isHelpFlag(arg string) bool {
	switch arg {
	case "-h", "-help", "--h", "--help":
		return true
	}
	return false
}

func checkNames() []string {
	var names []string
	for _, a := range analyzers {
		names = append(names, a.Name)
	}
	slices.Sort(names)
	return names
}

// writeHelp writes how to run cronlint in a belfry service: the commands
// the README gives, the checks, the flags that matter and suppression.
func writeHelp(w io.Writer) {
	fmt.Fprint(w, `cronlint checks //cron:schedule directives, their handlers, and that
zz_generated.cron.go still matches them.

Usage:
  go vet -vettool=$(go tool -n cronlint) ./...   in CI: exits non-zero on any finding
  go tool cronlint [flags] ./...                 the same checks, standalone
  go tool cronlint -fix ./...                    apply the suggested fixes, then run go generate
  cronlint help CHECK                            what CHECK reports, why, and how to fix it

Make it a tool of the module (as the README does; the module proxy does not serve belfry):
  go mod edit -tool github.com/belfry/belfry/cmd/cronlint && go mod tidy

Checks (all run; -CHECK runs only the checks named, -CHECK=false all but those):
`)
	sorted := slices.Clone(analyzers)
	slices.SortFunc(sorted, func(a, b *analysis.Analyzer) int { return strings.Compare(a.Name, b.Name) })
	for _, a := range sorted {
		title, _, _ := strings.Cut(a.Doc, "\n")
		fmt.Fprintf(w, "  %-11s %s\n", a.Name, title)
	}
	fmt.Fprint(w, "\nFlags:\n")
	flags := [][2]string{
		{"-fix", "apply the suggested fixes (they rewrite only what is reported), then report what remains"},
		{"-diff", "with -fix, print the changes as a diff instead of writing them"},
		{"-json", "print the findings as JSON"},
		{"-c N", "show each finding's line with N lines of context"},
		{"-test=false", "standalone, leave out _test.go files"},
	}
	for _, a := range sorted {
		a.Flags.VisitAll(func(f *flag.Flag) {
			kind, usage := flag.UnquoteUsage(f)
			if f.DefValue != "" {
				usage += " (default " + f.DefValue + ")"
			}
			flags = append(flags, [2]string{"-" + a.Name + "." + f.Name + " " + kind, usage})
		})
	}
	for _, f := range flags {
		fmt.Fprintf(w, "  %-22s %s\n", f[0], f[1])
	}
	fmt.Fprint(w, `
Suppress one check for one schedule, with a reason, in the directive's doc comment:
  //cronlint:ignore CHECK REASON
  //cronlint:ignore zone the books close on the Paris office's clock
`)
}
