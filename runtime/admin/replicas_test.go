package admin_test

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/belfry/belfry/runtime/admin"
)

// The page names each replica in a way an operator can act on: the
// process (pid and host) behind the lease holder and every replica, as
// the JSON status does beside the names it already gave.
func TestPageNamesEachReplicasProcess(t *testing.T) {
	t.Parallel()
	_, srv := adminSetup(t, admin.Options{})
	host, _ := os.Hostname()
	process := fmt.Sprintf("pid %d on %s", os.Getpid(), host)
	var status struct {
		Leader    *string  `json:"leader"`
		Replicas  []string `json:"replicas"`
		Processes map[string]struct {
			PID  int
			Host string
		} `json:"processes"`
	}
	waitFor(t, 5*time.Second, "the replica's heartbeat", func() bool {
		_, body := do(t, "GET", srv.URL+"/cron/api/status", nil, nil)
		return json.Unmarshal([]byte(body), &status) == nil && len(status.Replicas) == 1
	})
	if p := status.Processes["r0"]; status.Leader == nil || *status.Leader != "r0" || p.PID != os.Getpid() || p.Host != host {
		t.Errorf("status: leader %v, replicas %v, processes %+v; want r0 as pid %d on %s", status.Leader, status.Replicas, status.Processes, os.Getpid(), host)
	}
	_, body := do(t, "GET", srv.URL+"/cron/", nil, nil)
	start := strings.Index(body, `id="cluster"`)
	end := strings.Index(body[max(start, 0):], "</p>")
	if start < 0 || end < 0 {
		t.Fatalf("the page has no cluster line:\n%s", body)
	}
	line := body[start : start+end]
	holder := `<strong id="leader">r0</strong> <span class="muted">(` + process + `)</span>`
	replica := `<code>r0</code> <span class="muted">(` + process + `)</span>`
	if !strings.Contains(line, holder) || !strings.Contains(line, replica) {
		t.Errorf("the cluster line does not name r0's process (%s):\n%s", process, line)
	}
}
