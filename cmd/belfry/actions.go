package main

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// target is the schedule, or the family member, a command acts on.
type target struct {
	name, member string
}

// path is the API path of the target plus suffix.
func (t target) path(c *client, suffix string) string {
	if t.member != "" {
		return c.path("/api/schedules/", t.name, "/members/", t.member, suffix)
	}
	return c.path("/api/schedules/", t.name, suffix)
}

func (t target) String() string {
	if t.member != "" {
		return t.name + " member " + t.member
	}
	return t.name
}

// actionCommand is a command on one schedule (or, with --member, one
// member of a family).
func (a *app) actionCommand(use, short, example string, run func(cmd *cobra.Command, c *client, t target) error) (*cobra.Command, *target) {
	t := &target{}
	cmd := &cobra.Command{
		Use:     use,
		Short:   short,
		Example: example,
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			t.name = args[0]
			c, err := a.client()
			if err != nil {
				return err
			}
			return inCLIWords(*t, run(cmd, c, *t))
		},
	}
	cmd.Flags().StringVar(&t.member, "member", "", "act on one member `KEY` of a family")
	return cmd, t
}

// inCLIWords says a refusal the admin words for its API in the CLI's:
// a manual run of a family names the members' API paths, where the
// CLI's user needs --member.
func inCLIWords(t target, err error) error {
	var refused refusedError
	if t.member == "" && errors.As(err, &refused) && strings.HasPrefix(refused.msg, t.name+" is a family: run one of its members (") {
		return refusedError{fmt.Sprintf("%s is a family: run one of its members with --member KEY (belfry members %s lists them)", t.name, t.name)}
	}
	return err
}

// requestKeyFlag adds --request-key: one key per manual run, so a repeat
// of the request runs once.
func requestKeyFlag(cmd *cobra.Command) *string {
	key := cmd.Flags().String("request-key", "", "identifies this request: repeating it with the same `key` runs once (default: a fresh one, printed if no answer came)")
	return key
}

func (a *app) pauseCommand() *cobra.Command {
	var reason string
	cmd, _ := a.actionCommand("pause NAME --reason TEXT", "Pause a schedule (or a family member): its slots are recorded paused, not run",
		`  belfry pause prune-soft-deleted --reason "restoring last night's backup"
  belfry pause weekly-report --member acme --reason "tenant migrating"`,
		func(cmd *cobra.Command, c *client, t target) error {
			if strings.TrimSpace(reason) == "" {
				return usagef("--reason: say why, for whoever finds it paused")
			}
			raw, err := c.call(cmd.Context(), "POST", t.path(c, "/pause"), map[string]string{"reason": reason}, "", nil)
			if err != nil {
				return err
			}
			if a.output == "json" {
				return printJSON(a.stdout, raw)
			}
			fmt.Fprintf(a.stdout, "paused %s: %s\n", t, reason)
			return nil
		})
	cmd.Flags().StringVar(&reason, "reason", "", "why it is paused, shown to whoever finds it paused (required)")
	cmd.MarkFlagRequired("reason")
	return cmd
}

func (a *app) resumeCommand() *cobra.Command {
	cmd, _ := a.actionCommand("resume NAME", "Resume a paused schedule (or member): its next slot runs; paused slots stay unrun",
		"  belfry resume prune-soft-deleted",
		func(cmd *cobra.Command, c *client, t target) error {
			raw, err := c.call(cmd.Context(), "POST", t.path(c, "/resume"), nil, "", nil)
			if err != nil {
				return err
			}
			if a.output == "json" {
				return printJSON(a.stdout, raw)
			}
			fmt.Fprintf(a.stdout, "resumed %s\n", t)
			return nil
		})
	return cmd
}

// manualRun is the answer to a trigger or re-run.
type manualRun struct {
	TaskID string `json:"task_id"`
	Slot   string `json:"slot"`
}

func (a *app) runCommand() *cobra.Command {
	var key *string
	cmd, _ := a.actionCommand("run NAME", "Run a schedule (or member) now: one extra occurrence whose slot is now",
		`  belfry run send-digest
  belfry run send-digest --request-key deploy-42   # a repeat with the same key runs once`,
		func(cmd *cobra.Command, c *client, t target) error {
			k, err := requestKey(*key)
			if err != nil {
				return err
			}
			var out manualRun
			raw, err := c.call(cmd.Context(), "POST", t.path(c, "/trigger"), nil, k, &out)
			if err != nil {
				return err
			}
			if a.output == "json" {
				return printJSON(a.stdout, raw)
			}
			fmt.Fprintf(a.stdout, "enqueued %s now: task %s\n", t, out.TaskID)
			return nil
		})
	key = requestKeyFlag(cmd)
	return cmd
}

// requestKeyRE is the service's alphabet of request keys (runtime's
// requestKeyOf): a bad one is the caller's mistake, found before a request.
var requestKeyRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// requestKey is --request-key's key, checked, or a fresh one.
func requestKey(key string) (string, error) {
	if key == "" {
		return newRequestKey(), nil
	}
	if !requestKeyRE.MatchString(key) {
		return "", usagef("--request-key %q: want 1-64 letters, digits, '-' or '_'", key)
	}
	return key, nil
}

func (a *app) rerunCommand() *cobra.Command {
	var slot string
	var key *string
	cmd, _ := a.actionCommand("rerun NAME --slot RFC3339", "Run a past slot of a schedule (or member) again, with that slot's key",
		`  belfry rerun prune-soft-deleted --slot 2026-12-04T03:17:00Z`,
		func(cmd *cobra.Command, c *client, t target) error {
			at, err := parseTime("slot", slot)
			if err != nil {
				return err
			}
			k, err := requestKey(*key)
			if err != nil {
				return err
			}
			var out manualRun
			raw, err := c.call(cmd.Context(), "POST", t.path(c, "/runs"), map[string]time.Time{"slot": at}, k, &out)
			if err != nil {
				return err
			}
			if a.output == "json" {
				return printJSON(a.stdout, raw)
			}
			// The slot comes back in the schedule's zone, offset written out.
			fmt.Fprintf(a.stdout, "enqueued a re-run of %s, slot %s: task %s\n", t, out.Slot, out.TaskID)
			return nil
		})
	cmd.Flags().StringVar(&slot, "slot", "", "the slot to run again, RFC 3339 (required; one the schedule really had)")
	cmd.MarkFlagRequired("slot")
	key = requestKeyFlag(cmd)
	return cmd
}

func (a *app) backfillCommand() *cobra.Command {
	var from, to string
	var key *string
	cmd, _ := a.actionCommand("backfill NAME --from RFC3339 --to RFC3339", "Re-run every slot of a schedule (or member) in a range (at most 100)",
		`  belfry backfill prune-soft-deleted --from 2026-12-01T00:00:00Z --to 2026-12-04T00:00:00Z`,
		func(cmd *cobra.Command, c *client, t target) error {
			start, err := parseTime("from", from)
			if err != nil {
				return err
			}
			end, err := parseTime("to", to)
			if err != nil {
				return err
			}
			var out struct {
				TaskIDs []string `json:"task_ids"`
				Error   string   `json:"error"`
			}
			k, err := requestKey(*key)
			if err != nil {
				return err
			}
			raw, err := c.call(cmd.Context(), "POST", t.path(c, "/runs"), map[string]time.Time{"from": start, "to": end}, k, &out)
			if err != nil {
				return err
			}
			if a.output == "json" {
				if err := printJSON(a.stdout, raw); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(a.stdout, "enqueued %s of %s:\n", plural(len(out.TaskIDs), "re-run", "re-runs"), t)
				for _, id := range out.TaskIDs {
					fmt.Fprintln(a.stdout, id)
				}
			}
			if out.Error != "" { // some enqueued, then the service failed
				return refusedError{fmt.Sprintf("stopped after %d re-runs: %s; repeat with --request-key %s to enqueue the rest (the ones done are not enqueued twice)",
					len(out.TaskIDs), out.Error, k)}
			}
			return nil
		})
	cmd.Flags().StringVar(&from, "from", "", "first instant of the range, RFC 3339 (required)")
	cmd.Flags().StringVar(&to, "to", "", "last instant of the range, RFC 3339, not in the future (required)")
	cmd.MarkFlagRequired("from")
	cmd.MarkFlagRequired("to")
	key = requestKeyFlag(cmd)
	return cmd
}

// plural writes "1 re-run" or "3 re-runs".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
