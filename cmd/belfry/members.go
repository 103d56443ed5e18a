package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

func (a *app) membersCommand() *cobra.Command {
	var zone, expr, query string
	var paused bool
	cmd := &cobra.Command{
		Use:   "members FAMILY [ls | set KEY [--tz ZONE] [--expr EXPR] [--paused] | rm KEY]",
		Short: "List, set or remove the members of a family (a schedule declared with per=)",
		Long: `members manages a family's members, each with its own zone and, optionally,
its own expression. Without a verb it lists them (ls), reading every page.

set creates or updates a member: --tz is its zone (required to create one);
--expr its own expression, --expr "" the family's. What set does not name
stays as it was: a member's zone, its own expression, and its pause (with the
pause's reason) unless --paused=false resumes it. A new member follows the family's expression
unless --expr names one. rm removes a member.`,
		Example: `  belfry members weekly-report
  belfry members weekly-report set acme --tz Europe/Paris
  belfry members weekly-report set globex --tz America/New_York --expr "0 8 * * MON"
  belfry members weekly-report rm acme`,
		Args: usageArgs(cobra.RangeArgs(1, 3)),
		RunE: func(cmd *cobra.Command, args []string) error {
			family, verb, rest := args[0], "ls", args[1:]
			if len(rest) > 0 {
				verb, rest = rest[0], rest[1:]
			}
			flags := cmd.Flags()
			setOnly := flags.Changed("tz") || flags.Changed("expr") || flags.Changed("paused")
			switch {
			case verb != "ls" && verb != "set" && verb != "rm":
				return usagef("members %s %s: unknown verb; want ls, set or rm", family, verb)
			case verb == "ls" && len(rest) > 0:
				return usagef("members %s ls takes no argument; got %q", family, rest[0])
			case verb != "ls" && len(rest) != 1:
				return usagef("members %s %s needs the member's KEY", family, verb)
			case verb != "set" && setOnly:
				return usagef("--tz, --expr and --paused belong to members %s set", family)
			case verb != "ls" && flags.Changed("query"):
				return usagef("--query belongs to members %s ls", family)
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			switch verb {
			case "set":
				var exprFlag, pausedFlag *string
				if flags.Changed("expr") {
					exprFlag = &expr
				}
				if flags.Changed("paused") {
					p := strconv.FormatBool(paused)
					pausedFlag = &p
				}
				return a.setMember(cmd, c, family, rest[0], zone, exprFlag, pausedFlag)
			case "rm":
				return a.removeMember(cmd, c, family, rest[0])
			}
			return a.listMembers(cmd, c, family, query)
		},
	}
	cmd.Flags().StringVar(&zone, "tz", "", "set: the member's IANA `zone`")
	cmd.Flags().StringVar(&expr, "expr", "", "set: the member's own cron `expression`; \"\" for the family's (default: unchanged)")
	cmd.Flags().BoolVar(&paused, "paused", false, "set: pause (true) or resume (false) the member (default: unchanged)")
	cmd.Flags().StringVarP(&query, "query", "q", "", "ls: only members whose key contains this `text`")
	return cmd
}

func (a *app) listMembers(cmd *cobra.Command, c *client, family, query string) error {
	var all []rawMember
	cursor := ""
	for {
		v := url.Values{"limit": {strconv.Itoa(a.pageSize)}}
		if query != "" {
			v.Set("q", query)
		}
		if cursor != "" {
			v.Set("cursor", cursor)
		}
		var page apiMembersPage
		if _, err := c.call(cmd.Context(), "GET", c.path("/api/schedules/", family, "/members")+"?"+v.Encode(), nil, "", &page); err != nil {
			return err
		}
		all = append(all, page.Members...)
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	if a.output == "json" {
		return printJSONValue(a.stdout, orEmpty(all))
	}
	members := make([]apiMember, len(all))
	for i, raw := range all {
		if err := json.Unmarshal(raw, &members[i]); err != nil {
			return refusedError{"the member list is not the admin's JSON: " + err.Error()}
		}
	}
	// A page comes in no particular order (Redis HSCAN): sorted here.
	slices.SortFunc(members, func(a, b apiMember) int { return strings.Compare(a.Member, b.Member) })
	if len(members) == 0 {
		fmt.Fprintf(a.stderr, "%s has no members\n", family)
		return nil
	}
	now := time.Now()
	t := newTable(a.stdout, "MEMBER", "ZONE", "EXPRESSION", "PAUSED", "NEXT RUN", "LAST RUN")
	for _, m := range members {
		loc := zoneOf(m.Zone)
		expression := m.Expression
		if m.Expr == "" {
			expression += " (family's)"
		}
		pausedCell := "no"
		if m.Paused {
			pausedCell = "yes"
			if m.Pause != nil && m.Pause.Reason != "" {
				pausedCell += ": " + m.Pause.Reason
			}
		}
		last := ""
		if m.LastRun != nil {
			last = m.LastRun.Outcome + " " + ago(m.LastRun.At, now)
		}
		t.row(m.Member, m.Zone, expression, pausedCell, whenRFC3339(m.NextRun, loc), last)
	}
	t.flush()
	return nil
}

// setMember creates or replaces a member. PUT replaces the whole member,
// so what the command does not name is read first and kept: a paused
// member stays paused (with its reason) and a member's own expression
// stays its own unless --paused or --expr say otherwise.
func (a *app) setMember(cmd *cobra.Command, c *client, family, key, zone string, expr, paused *string) error {
	target := c.path("/api/schedules/", family, "/members/", key)
	var current apiMember
	if expr == nil || paused == nil || zone == "" {
		resp, err := c.send(cmd.Context(), "GET", target, nil, "")
		if err != nil {
			return err
		}
		switch resp.status {
		case http.StatusOK:
			if err := json.Unmarshal(resp.body, &current); err != nil {
				return refusedError{"the member is not the admin's JSON: " + err.Error()}
			}
		case http.StatusNotFound: // a new member, or no such family: the PUT says which
			if zone == "" {
				return usagef("members %s set %s: no such member yet; --tz is required to create it (its IANA zone, e.g. Europe/Paris)", family, key)
			}
		default:
			return refusedError{refusal(resp)}
		}
	}
	if zone == "" {
		zone = current.Zone
	}
	body := map[string]any{"zone": zone, "expr": current.Expr, "paused": current.Paused}
	if expr != nil {
		body["expr"] = *expr
	}
	keptPause := paused == nil && current.Paused
	if paused != nil {
		body["paused"] = *paused == "true"
	}
	resp, err := c.send(cmd.Context(), "PUT", target, body, "")
	if err != nil {
		return err
	}
	if resp.status != http.StatusOK && resp.status != http.StatusCreated {
		return refusedError{refusal(resp)}
	}
	if a.output == "json" {
		return printJSON(a.stdout, resp.body)
	}
	var m apiMember
	if err := json.Unmarshal(resp.body, &m); err != nil {
		return refusedError{"the member is not the admin's JSON: " + err.Error()}
	}
	verb := "updated"
	if resp.status == http.StatusCreated {
		verb = "created"
	}
	expression := m.Expression
	if m.Expr == "" {
		expression += " (the family's)"
	}
	state := ""
	switch {
	case m.Paused && keptPause:
		state = "; still paused (belfry resume " + family + " --member " + key + ")"
	case m.Paused:
		state = "; paused"
	}
	fmt.Fprintf(a.stdout, "%s %s member %s: %s in %s, next run %s%s\n", verb, family, m.Member, expression, m.Zone,
		whenRFC3339(m.NextRun, zoneOf(m.Zone)), state)
	return nil
}

func (a *app) removeMember(cmd *cobra.Command, c *client, family, key string) error {
	if _, err := c.call(cmd.Context(), "DELETE", c.path("/api/schedules/", family, "/members/", key), nil, "", nil); err != nil {
		return err
	}
	if a.output == "json" {
		return printJSONValue(a.stdout, map[string]string{"removed": key})
	}
	fmt.Fprintf(a.stdout, "removed %s member %s\n", family, key)
	return nil
}

func (a *app) showMember(cmd *cobra.Command, c *client, family, key string, nextN int) error {
	var m apiMember
	raw, err := c.call(cmd.Context(), "GET", c.path("/api/schedules/", family, "/members/", key), nil, "", &m)
	if err != nil {
		return err
	}
	if a.output == "json" {
		return printJSON(a.stdout, raw)
	}
	var next apiNextRuns
	if nextN > 0 {
		if _, err := c.call(cmd.Context(), "GET", c.path("/api/schedules/", family, "/members/", key, "/next")+"?n="+strconv.Itoa(nextN), nil, "", &next); err != nil {
			return err
		}
	}
	loc, now := zoneOf(m.Zone), time.Now()
	f := newFields(a.stdout)
	f.add("Family", family)
	f.add("Member", m.Member)
	status := "runs"
	if m.Paused {
		status = "paused"
	}
	f.add("Status", status)
	if m.Pause != nil {
		f.add("Paused", pauseWords(m.Pause, loc, now))
	}
	expression := m.Expression
	if m.Expr == "" {
		expression += " (the family's)"
	}
	f.add("Expression", expression)
	f.add("Zone", m.Zone)
	if runs := nextRuns(next, loc); len(runs) > 0 {
		if m.Paused {
			runs[0] += " (paused: recorded, not run)"
		}
		f.list("Next runs", runs)
	}
	f.flush()
	printHistory(a, m.History, loc, false)
	return nil
}
