// Crongen compiles //cron:schedule directives into a typed registry.
//
// Usage:
//
//	crongen                      generate for the package in the current directory
//	crongen generate [packages]  generate for the named packages (default ".")
//	crongen next [--tz ZONE] [--from RFC3339] [-n N] [--name NAME] [--phase D] "<expr>"
//	crongen list [--now RFC3339] [packages]
//
// Add it to a module as a tool dependency, which go mod tidy keeps (with
// a replace of github.com/belfry/belfry by a checkout, as the README
// shows: the module proxy does not serve belfry, so go get -tool fails):
//
//	go mod edit -tool github.com/belfry/belfry/cmd/crongen && go mod tidy
//
// and in a package with schedules:
//
//	//go:generate go tool crongen
//
// crongen then writes zz_generated.cron.go next to the handlers: task-name
// constants, compile-time checks of every handler's signature, and either
// the Registry value (when every handler is a func) or NewRegistry, which
// takes the receivers of the handlers that are methods. The runtime
// registers the handlers on asynq (Runtime.RegisterHandlers) and records
// every execution. Problems are printed as file:line:col:
// message, all of them, and then nothing is written.
//
// Exit status: 0 on success, 1 when the packages have problems, 2 for a
// usage error (including a bad expression, zone, time or count for next).
package main

import (
	"errors"
	"fmt"
	"io"
	"log"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	log.SetPrefix("crongen: ")
	log.SetFlags(0)
	dir, err := os.Getwd()
	if err != nil {
		log.Fatal(err)
	}
	a := &app{dir: dir, stdout: os.Stdout, stderr: os.Stderr}
	os.Exit(a.run(os.Args[1:]))
}

// app is one invocation. Tests build it directly to run in a directory and
// environment of their own without changing the process's.
type app struct {
	dir            string   // working directory: packages and printed file names are relative to it
	env            []string // environment of the go command; nil means the process's
	stdout, stderr io.Writer
}

// usageError marks errors in how crongen was invoked, which exit with 2 as
// flag parsing errors conventionally do.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// errReported means the problems have already been printed, one per line.
var errReported = errors.New("problems reported")

func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return usageError{err}
		}
		return nil
	}
}

func (a *app) run(args []string) int {
	root := a.rootCommand()
	root.SetArgs(args)
	err := root.Execute()
	var usage usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errReported):
		return 1
	case errors.As(err, &usage):
		fmt.Fprintf(a.stderr, "crongen: %v\n", err)
		return 2
	default:
		fmt.Fprintf(a.stderr, "crongen: %v\n", err)
		return 1
	}
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "crongen",
		Short: "Compile //cron:schedule directives into a typed registry",
		Long: `crongen finds every //cron:schedule directive in a package, validates it and
writes zz_generated.cron.go with the package's Registry. Without a command it
generates for the package in the current directory, for use in

	//go:generate go tool crongen`,
		Args:          usageArgs(cobra.NoArgs),
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.generate([]string{"."})
		},
	}
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.CompletionOptions.DisableDefaultCmd = true
	root.AddCommand(a.generateCommand(), a.nextCommand(), a.listCommand())
	return root
}

func (a *app) generateCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "generate [packages]",
		Short: "Write zz_generated.cron.go for each package (default \".\")",
		Long: `generate validates every //cron:schedule directive of the packages and writes
zz_generated.cron.go into each package that has schedules; it removes a stale
one from a package that has none left. On any problem it prints all of them
as file:line:col: message, writes nothing and exits with status 1.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				args = []string{"."}
			}
			return a.generate(args)
		},
	}
}
