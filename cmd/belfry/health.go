package main

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/spf13/cobra"
)

func (a *app) healthCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "health",
		Short: "Show the scheduler's health; exit 3 when unhealthy or disabled",
		Long: `health reads the admin's /healthz (what an alert sees: late or failing
schedules, no lease holder, Redis down, queues without workers) and its
/api/status (the lease holder and replicas).

Exit status: 0 healthy; 3 the service answered unhealthy or disabled (its
problems printed); 1 no answer, or a refusal (e.g. the host's authentication).`,
		Example: `  belfry health || page-the-on-call`,
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			resp, err := c.send(cmd.Context(), "GET", c.path("/healthz"), nil, "")
			if err != nil {
				return err
			}
			var h apiHealth
			// 503 with the health JSON is an answer: unhealthy; anything
			// else that is not 200 is a refusal.
			if (resp.status != http.StatusOK && resp.status != http.StatusServiceUnavailable) ||
				json.Unmarshal(resp.body, &h) != nil || h.Status == "" {
				return refusedError{refusal(resp)}
			}
			if a.output == "json" {
				if err := printJSON(a.stdout, resp.body); err != nil {
					return err
				}
			} else {
				var status apiStatus
				// The status adds the replicas; without it health still says
				// what matters.
				_, statusErr := c.call(cmd.Context(), "GET", c.path("/api/status"), nil, "", &status)
				f := newFields(a.stdout)
				f.add("Status", h.Status)
				f.add("Redis", h.Redis)
				f.add("Leader", h.Leader)
				if statusErr == nil {
					f.add("Replicas", strings.Join(status.Replicas, ", "))
				}
				for _, l := range []struct {
					label string
					names []string
				}{{"Failing", h.Failing}, {"Late", h.Late}, {"Paused", h.Paused}, {"Unserved queues", h.Unserved}} {
					if len(l.names) > 0 {
						f.add(l.label, strings.Join(l.names, ", "))
					}
				}
				f.list("Problems", h.Problems)
				f.flush()
			}
			if h.Status != "ok" {
				return unhealthyError{h.Status}
			}
			return nil
		},
	}
}
