// Package scripttest holds testscript commands the CLIs' script tests
// share.
package scripttest

import (
	"errors"
	"os/exec"
	"strconv"

	"github.com/rogpeppe/go-internal/testscript"
)

// ExitCode runs a command and checks its exit status, which the builtin
// exec cannot tell apart beyond zero and non-zero:
//
//	exitcode 2 crongen next --tz Nowhere '* * * * *'
func ExitCode(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("usage: exitcode N command [args...] (no !)")
	}
	if len(args) < 2 {
		ts.Fatalf("usage: exitcode N command [args...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("exitcode: %q is not a number", args[0])
	}
	if got := Status(ts, args[1], args[2:]...); got != want {
		ts.Fatalf("%s exited with status %d, want %d", args[1], got, want)
	}
}

// Status runs a command, as exec does, and returns its exit status.
func Status(ts *testscript.TestScript, name string, args ...string) int {
	err := ts.Exec(name, args...)
	if err == nil {
		return 0
	}
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) {
		ts.Fatalf("%s: %v", name, err)
	}
	return exitErr.ExitCode()
}
