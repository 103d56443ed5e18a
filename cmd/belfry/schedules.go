package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

// statuses are the ones the API knows, in its list's order (problems
// first).
var statuses = []string{"failing", "late", "paused", "running", "unknown", "ok", "disabled"}

func (a *app) lsCommand() *cobra.Command {
	var status []string
	var query string
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the schedules, problems first (failing, late, paused, then ok)",
		Long: `ls lists every schedule with its status, expression, zone, next run (in the
schedule's zone) and last run, in the order the admin page uses: failing, late,
paused, running, unknown, ok, disabled, by name within each.`,
		Example: `  belfry ls
  belfry ls --status failing --status late
  belfry ls -q report -o json`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			var want []string
			for _, s := range status {
				for part := range strings.SplitSeq(s, ",") {
					part = strings.TrimSpace(part)
					if !slices.Contains(statuses, part) {
						return usagef("--status %q: want one of %s", part, strings.Join(statuses, ", "))
					}
					want = append(want, part)
				}
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			return a.ls(cmd, c, want, query)
		},
	}
	cmd.Flags().StringSliceVar(&status, "status", nil, "only schedules with this `status` ("+strings.Join(statuses, ", ")+"); repeat or comma-separate for several")
	cmd.Flags().StringVarP(&query, "query", "q", "", "only schedules whose name contains this `text`")
	return cmd
}

func (a *app) ls(cmd *cobra.Command, c *client, status []string, query string) error {
	var all []rawSchedule
	var missing []apiMissing
	cursor := ""
	for {
		v := url.Values{"limit": {strconv.Itoa(a.pageSize)}}
		if len(status) > 0 {
			v.Set("status", strings.Join(status, ","))
		}
		if query != "" {
			v.Set("q", query)
		}
		if cursor != "" {
			v.Set("cursor", cursor)
		}
		var page apiPage
		if _, err := c.call(cmd.Context(), "GET", c.path("/api/schedules")+"?"+v.Encode(), nil, "", &page); err != nil {
			return err
		}
		all = append(all, page.Schedules...)
		missing = append(missing, page.Missing...)
		if page.NextCursor == nil || *page.NextCursor == "" {
			break
		}
		cursor = *page.NextCursor
	}
	if a.output == "json" {
		return printJSONValue(a.stdout, orEmpty(all))
	}
	if len(all) == 0 {
		fmt.Fprintln(a.stderr, "no schedules match")
		warnMissing(a, missing)
		return nil
	}
	now := time.Now()
	t := newTable(a.stdout, "NAME", "STATUS", "EXPRESSION", "ZONE", "NEXT RUN", "LAST RUN")
	for _, raw := range all {
		var s apiSchedule
		if err := json.Unmarshal(raw, &s); err != nil {
			return refusedError{"the schedule list is not the admin's JSON: " + err.Error()}
		}
		expr, zone, loc := s.Expression, s.Zone, zoneOf(s.Zone)
		if s.Per != "" {
			// A family's next run is its members' earliest, each in a zone
			// of its own: shown in UTC.
			zone, loc = "per "+s.Per, time.UTC
		}
		next := whenRFC3339(s.NextRun, loc)
		if s.manyExpressions() {
			// The family's expression is only the default of members that
			// give none: beside a next run of another expression it would
			// read as that expression's next run.
			expr += " (default)"
			if who := s.NextRunFor; who != nil {
				next += " for " + who.Expression + " in " + who.Zone
			}
		}
		t.row(s.Name, s.Status, expr, zone, next, lastRunCell(s.LastRun, now))
	}
	t.flush()
	warnMissing(a, missing)
	return nil
}

func lastRunCell(r *apiRecord, now time.Time) string {
	if r == nil {
		return ""
	}
	at := r.FinishedAt
	if at.IsZero() {
		at = r.Slot
	}
	return r.Outcome + " " + ago(at, now)
}

// warnMissing says on stderr what the service could not read, so a table
// with holes is not taken for a whole one.
func warnMissing(a *app, missing []apiMissing) {
	seen := map[apiMissing]bool{}
	for _, m := range missing {
		if !seen[m] {
			seen[m] = true
			fmt.Fprintf(a.stderr, "belfry: not read: %s: %s\n", m.Part, m.Reason)
		}
	}
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func (a *app) showCommand() *cobra.Command {
	var member string
	var next int
	cmd := &cobra.Command{
		Use:   "show NAME",
		Short: "Show a schedule: status, expression, zone, next runs, recent history",
		Example: `  belfry show prune-soft-deleted
  belfry show weekly-report --member acme`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if next < 0 || next > 100 {
				return usagef("--next %d: want 0 to 100", next)
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			if member != "" {
				return a.showMember(cmd, c, args[0], member, next)
			}
			return a.show(cmd, c, args[0], next)
		},
	}
	cmd.Flags().StringVar(&member, "member", "", "show one member `KEY` of a family")
	cmd.Flags().IntVar(&next, "next", 5, "how many next runs to show")
	return cmd
}

func (a *app) show(cmd *cobra.Command, c *client, name string, nextN int) error {
	var s apiSchedule
	raw, err := c.call(cmd.Context(), "GET", c.path("/api/schedules/", name), nil, "", &s)
	if err != nil {
		return err
	}
	if a.output == "json" {
		return printJSON(a.stdout, raw)
	}
	loc := zoneOf(s.Zone)
	var next apiNextRuns
	if s.Per == "" && nextN > 0 {
		if _, err := c.call(cmd.Context(), "GET", c.path("/api/schedules/", name, "/next")+"?n="+strconv.Itoa(nextN), nil, "", &next); err != nil {
			return err
		}
	}
	now := time.Now()
	f := newFields(a.stdout)
	f.add("Name", s.Name)
	f.add("Status", s.Status)
	if s.Paused != nil {
		f.add("Paused", pauseWords(s.Paused, loc, now))
	}
	if s.manyExpressions() {
		f.add("Expression", fmt.Sprintf("%s (the members' default; they run on %d expressions)", s.Expression, *s.Expressions))
	} else {
		f.add("Expression", s.Expression)
	}
	if s.Per != "" {
		f.add("Zone", s.Zone+" (the members' default)")
		f.add("Per", s.Per)
		if s.Members != nil {
			f.add("Members", fmt.Sprintf("%d (belfry members %s)", *s.Members, s.Name))
		}
	} else {
		f.add("Zone", s.Zone)
	}
	f.add("Queue", s.Queue)
	f.add("Timeout", s.Timeout)
	f.add("Retries", strconv.Itoa(s.MaxRetry))
	f.add("Grace", s.Grace)
	f.add("Overlap", s.Overlap)
	f.add("Misfire", s.Misfire)
	if s.Source != "" {
		f.add("Source", s.Source)
	}
	if c := s.Counters; c != nil {
		// The API counts enqueues on schedule ("enqueued") and by hand
		// ("manual") apart, while succeeded and failed count attempts of
		// both: the total enqueued is their sum, as the admin page says it.
		f.add("Counters", fmt.Sprintf("%d enqueued (%d on schedule, %d by hand), %d succeeded, %d failed, %d missed, %d skipped, %d paused",
			c.Enqueued+c.Manual, c.Enqueued, c.Manual, c.Succeeded, c.Failed, c.Missed, c.Skipped, c.Paused))
	}
	if s.Per != "" {
		whose := ""
		if who := s.NextRunFor; who != nil && s.manyExpressions() {
			whose = ", for " + who.Expression + " in " + who.Zone
		}
		f.add("Next run", whenRFC3339(s.NextRun, time.UTC)+" (the earliest of its members"+whose+")")
	} else if len(next.NextRuns) > 0 {
		runs := nextRuns(next, loc)
		if s.Paused != nil {
			runs[0] += " (paused: recorded, not run)"
		}
		f.list("Next runs", runs)
	}
	f.flush()
	printHistory(a, s.History, loc, s.Per != "")
	warnMissing(a, s.Missing)
	return nil
}

// nextRuns shows the API's next runs in loc.
func nextRuns(next apiNextRuns, loc *time.Location) []string {
	runs := make([]string, len(next.NextRuns))
	for i, r := range next.NextRuns {
		runs[i] = whenRFC3339(&r, loc)
	}
	return runs
}

func pauseWords(p *apiPause, loc *time.Location, now time.Time) string {
	out := "since " + when(p.At, loc) + " (" + ago(p.At, now) + ")"
	if p.Actor != "" {
		out += " by " + p.Actor
	}
	if p.Reason != "" {
		out += ": " + p.Reason
	}
	return out
}

// printHistory writes a schedule's or member's recent occurrences, slots
// in its zone.
func printHistory(a *app, history []apiRecord, loc *time.Location, members bool) {
	fmt.Fprintln(a.stdout)
	if len(history) == 0 {
		fmt.Fprintln(a.stdout, "History: none")
		return
	}
	fmt.Fprintln(a.stdout, "History:")
	headers := []string{"SLOT", "OUTCOME", "ATTEMPT", "MANUAL", "ACTOR", "FINISHED", "TASK", "ERROR"}
	if members {
		headers = append([]string{"MEMBER"}, headers...)
	}
	t := newTable(a.stdout, headers...)
	for _, r := range history {
		manual := ""
		if r.Manual {
			manual = "yes"
		}
		attempt := "" // none yet: enqueued, or never run (missed, skipped, paused)
		if !r.StartedAt.IsZero() {
			attempt = fmt.Sprintf("%d/%d", r.Attempt+1, r.MaxRetry+1)
		}
		cells := []string{when(r.Slot, loc), r.Outcome, attempt, manual, r.Actor, when(r.FinishedAt, loc), r.ID, r.Error}
		if members {
			cells = append([]string{r.Member}, cells...)
		}
		t.row(cells...)
	}
	t.flush()
}

// fields writes "Label:  value" lines, aligned, as kubectl describe does.
type fields struct{ tw *tabwriter.Writer }

func newFields(w io.Writer) *fields {
	return &fields{tw: tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)}
}

func (f *fields) add(label, value string) {
	if value == "" {
		value = "-"
	}
	fmt.Fprintf(f.tw, "%s:\t%s\n", label, oneLine(value))
}

// list writes a label with one value a line.
func (f *fields) list(label string, values []string) {
	for i, v := range values {
		if i > 0 {
			label = ""
			fmt.Fprintf(f.tw, "\t%s\n", v)
			continue
		}
		f.add(label, v)
	}
}

func (f *fields) flush() { f.tw.Flush() }

// manyExpressions reports a family whose members run on more than one
// expression, so that its own is not what every member runs.
func (s apiSchedule) manyExpressions() bool {
	return s.Per != "" && s.Expressions != nil && *s.Expressions > 1
}
