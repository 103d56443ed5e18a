package main

import (
	"cmp"
	"fmt"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

func (a *app) listCommand() *cobra.Command {
	var now string
	cmd := &cobra.Command{
		Use:   "list [flags] [packages]",
		Short: "Print every schedule of the packages with its next fire time",
		Long: `list prints one row per schedule declared in the packages (default "."),
sorted by name: its name, expression, zone, queue and next fire time in its
zone (for a family, declared with per=, the members' default zone). It validates the directives as generate does and reports problems the
same way.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			at := time.Now()
			if now != "" {
				var err error
				if at, err = parseInstant("--now", now); err != nil {
					return err
				}
			}
			if len(args) == 0 {
				args = []string{"."}
			}
			l := &loader{dir: a.dir, env: a.env}
			targets, err := l.load(args)
			if err != nil {
				return err
			}
			if err := a.reportProblems(l, targets, args); err != nil {
				return err
			}
			var all []*schedule
			for _, t := range targets {
				all = append(all, t.schedules...)
			}
			slices.SortStableFunc(all, func(x, y *schedule) int { return cmp.Compare(x.name, y.name) })

			tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tEXPR\tZONE\tQUEUE\tNEXT")
			for _, s := range all {
				next := "never"
				if t := s.directive.Cron.Next(at); !t.IsZero() {
					next = t.Format(time.RFC3339)
				}
				d := s.directive
				zone := d.Zone
				if d.Per != "" {
					// A family's members each have a zone; its own is
					// their default, and so is NEXT.
					zone = fmt.Sprintf("per %s (default %s)", d.Per, d.Zone)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.name, d.Expr, zone, d.Queue, next)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&now, "now", "", "compute NEXT from this `RFC3339` instant instead of the current time")
	return cmd
}
