// Belfry is the operator's command line for a service that runs belfry: it
// speaks the admin's JSON API (package runtime/admin), wherever the
// service mounts it, and migrates the Postgres engine's schema.
//
// Usage:
//
//	belfry [--url URL] [--header 'Name: value']... [-o table|json] COMMAND
//
//	belfry ls [--status S]...            schedules, problems first
//	belfry show NAME [--member KEY]      status, expression, zone, next runs, history
//	belfry pause NAME --reason TEXT      pause (a family member with --member)
//	belfry resume NAME                   resume
//	belfry run NAME                      run now
//	belfry rerun NAME --slot RFC3339     run a past slot again
//	belfry backfill NAME --from T --to T re-run every slot in a range
//	belfry members FAMILY [ls|set|rm]    a family's members
//	belfry health                        the scheduler's health
//	belfry migrate --postgres URL        create or upgrade the Postgres engine's schema
//
// --url (default $BELFRY_URL) is where the host mounts the admin, e.g.
// http://127.0.0.1:8080/cron. See docs/cli.md.
//
// Exit status: 0 done; 1 the service refused or could not be reached (its
// message printed); 2 usage (unknown command, missing argument, bad flag or
// time); 3 health answered, unhealthy or disabled.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"
	_ "time/tzdata" // times are shown in each schedule's zone, whatever the machine has installed

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	a := &app{stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}
	code := a.run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

// Exit statuses.
const (
	exitOK        = 0
	exitRefused   = 1
	exitUsage     = 2
	exitUnhealthy = 3
)

// app is one invocation; tests build it with their own streams and
// environment.
type app struct {
	stdout, stderr io.Writer
	getenv         func(string) string

	// global flags
	baseURL string
	headers []string
	output  string
	actor   string
	timeout time.Duration
	// pageSize is how many rows one request of a list asks for; hidden,
	// for the tests that read a list over several pages.
	pageSize int
}

// usageError is a mistake in how belfry was called: exit status 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// unhealthyError is a health check that answered: exit status 3.
type unhealthyError struct{ status string }

func (e unhealthyError) Error() string { return "the scheduler is " + e.status }

// usageArgs makes cobra's argument checks usage errors.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return usageError{err}
		}
		return nil
	}
}

func (a *app) run(ctx context.Context, args []string) int {
	root := a.rootCommand()
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	var usage usageError
	var unhealthy unhealthyError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &unhealthy):
		return exitUnhealthy
	case errors.As(err, &usage) || isCobraUsage(err):
		fmt.Fprintf(a.stderr, "belfry: %s\n", oneLine(err.Error()))
		return exitUsage
	default:
		fmt.Fprintf(a.stderr, "belfry: %s\n", oneLine(err.Error()))
		return exitRefused
	}
}

// isCobraUsage recognises cobra's own usage errors (an unknown command, a
// required flag not given), which it returns without a type of their own.
func isCobraUsage(err error) bool {
	return strings.HasPrefix(err.Error(), "unknown command ") || strings.HasPrefix(err.Error(), "required flag(s) ")
}

// oneLine keeps a message on one line: a service's error text may hold
// newlines (an HTML error page, a stack).
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "belfry",
		Short: "Operate the schedules of a service that runs belfry",
		Long: `belfry speaks a service's belfry admin JSON API: list and inspect schedules,
pause and resume them, run one now, re-run a past slot or backfill a range,
manage a family's members, check health. It also migrates the Postgres
engine's schema (belfry migrate).

--url (or BELFRY_URL) is where the service mounts the admin handler, e.g.
http://127.0.0.1:8080/cron. --header passes the host's authentication.

Exit status: 0 done; 1 the service refused or was unreachable (its message
printed); 2 usage; 3 belfry health found the scheduler unhealthy or disabled.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmd.Help()
		},
	}
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.CompletionOptions.DisableDefaultCmd = true
	pf := root.PersistentFlags()
	pf.StringVar(&a.baseURL, "url", a.getenv("BELFRY_URL"), "`URL` where the service mounts the admin, e.g. http://127.0.0.1:8080/cron (default $BELFRY_URL)")
	pf.StringArrayVarP(&a.headers, "header", "H", nil, "`'Name: value'` header sent with every request, e.g. the host's authentication (repeatable)")
	pf.StringVarP(&a.output, "output", "o", "table", "output `format`: table or json (the API's JSON)")
	pf.StringVar(&a.actor, "actor", a.getenv("BELFRY_ACTOR"), "who acts, as the ledger records it (default $BELFRY_ACTOR, else user@host); the host's authentication, when it names one, takes precedence")
	pf.DurationVar(&a.timeout, "timeout", 30*time.Second, "how long to wait for each answer of the service")
	// The API's largest page: a list of thousands is a few requests.
	pf.IntVar(&a.pageSize, "page-size", 1000, "rows per request of a list (1-1000)")
	pf.MarkHidden("page-size")
	root.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
		if a.output != "table" && a.output != "json" {
			return usagef("-o %q: want table or json", a.output)
		}
		if a.pageSize < 1 || a.pageSize > 1000 {
			return usagef("--page-size %d: want 1 to 1000", a.pageSize)
		}
		return nil
	}
	root.AddCommand(a.lsCommand(), a.showCommand(), a.pauseCommand(), a.resumeCommand(), a.runCommand(),
		a.rerunCommand(), a.backfillCommand(), a.membersCommand(), a.healthCommand(), a.migrateCommand())
	for _, c := range root.Commands() {
		c.SilenceUsage, c.SilenceErrors = true, true
	}
	return root
}
