package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/belfry/belfry/registry"
)

// maxCount bounds -n: enough to inspect a year of an hourly schedule, not so
// many that a typo floods the terminal.
const maxCount = 10000

func (a *app) nextCommand() *cobra.Command {
	var (
		zone, from, name string
		count            int
		phase            time.Duration
	)
	cmd := &cobra.Command{
		Use:   `next [flags] "<expr>"`,
		Short: "Print the next fire times of a cron expression",
		Long: `next prints the next N fire times of a cron expression strictly after --from,
one RFC3339 timestamp per line in the zone's offset, computed by the same code
the runtime uses, daylight-saving rules included. An expression using H needs
the schedule's --name, which H hashes; --phase shifts @every slots as the
directive key phase= does. Put -- before an expression that starts with '-'.`,
		Example: `  crongen next --tz America/New_York --from 2026-03-07T12:00:00-05:00 -n 3 "30 2 * * *"
  crongen next --name nightly-report "H 3 * * *"
  crongen next --phase 17m "@every 1h"`,
		Args: usageArgs(func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf(`next takes one cron expression in quotes, e.g. crongen next "17 3 * * *"; got %d arguments`, len(args))
			}
			return nil
		}),
		RunE: func(cmd *cobra.Command, args []string) error {
			if count < 1 || count > maxCount {
				return usageError{fmt.Errorf("-n must be from 1 to %d; got %d", maxCount, count)}
			}
			loc, err := registry.LoadZone(zone)
			switch {
			case err != nil && (zone == "" || zone == "Local"):
				return usageError{fmt.Errorf("--tz %q depends on the host; name an IANA zone such as --tz UTC or --tz Europe/Berlin", zone)}
			case err != nil:
				hint := ""
				if near := registry.SuggestZone(zone); near != "" {
					hint = fmt.Sprintf(" (did you mean --tz %s?)", near)
				}
				return usageError{fmt.Errorf("--tz: unknown zone %q%s; want an IANA name such as --tz UTC or --tz America/New_York", zone, hint)}
			}
			t := time.Now()
			if from != "" {
				if t, err = parseInstant("--from", from); err != nil {
					return err
				}
			}
			c, err := registry.ParseCron(args[0], loc, registry.WithName(name), registry.WithPhase(phase), registry.FlagHints())
			if err != nil {
				return usageError{fmt.Errorf("bad cron expression %q: %v", args[0], err)}
			}
			for range count {
				next := c.Next(t)
				if next.IsZero() {
					return fmt.Errorf("%q does not fire in %s within 30 years after %s", args[0], zone, t.Format(time.RFC3339))
				}
				fmt.Fprintln(a.stdout, next.Format(time.RFC3339))
				t = next
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&zone, "tz", registry.ZoneDefault, "IANA `ZONE` the expression is evaluated in")
	cmd.Flags().StringVar(&from, "from", "", "print fire times strictly after this `RFC3339` instant (default now)")
	cmd.Flags().IntVarP(&count, "count", "n", 5, "print `N` fire times")
	cmd.Flags().StringVar(&name, "name", "", "the schedule's `NAME`, from which H fields take their values")
	cmd.Flags().DurationVar(&phase, "phase", 0, "shift the slots of an @every expression by `DURATION` (as phase=)")
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return usageError{flagOrExpression(err)}
	})
	return cmd
}

// flagOrExpression explains a flag error caused by an expression that
// starts with '-' ("-1 * * * *"), which the flag parser reads as flags.
func flagOrExpression(err error) error {
	var unknown interface{ GetSpecifiedShortnames() string }
	if errors.As(err, &unknown) {
		if arg := unknown.GetSpecifiedShortnames(); strings.ContainsAny(arg, " \t") {
			return fmt.Errorf("%q was read as flags: put -- before an expression that starts with '-', e.g. crongen next -- %q", "-"+arg, "-"+arg)
		}
	}
	return err
}

func parseInstant(flag, value string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, value)
	if err != nil {
		return time.Time{}, usageError{fmt.Errorf("%s %q is not an RFC3339 time; want e.g. 2026-03-07T12:00:00-05:00", flag, value)}
	}
	return t, nil
}
