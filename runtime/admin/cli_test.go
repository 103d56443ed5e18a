package admin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/belfry/belfry/runtime"
	"github.com/belfry/belfry/runtime/admin"
)

// The routes the operator CLI adds: a schedule's (or member's) next runs,
// and the actor a client claims.

func TestNextRunsAreTheSchedulesOwnSlotsInItsZone(t *testing.T) {
	t.Parallel()
	c, srv := familySetup(t, admin.Options{})
	resp, body := do(t, "GET", srv.URL+"/cron/api/schedules/nightly/next?n=3", nil, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	var got struct {
		Zone     string   `json:"zone"`
		NextRuns []string `json:"next_runs"`
		UTC      []string `json:"next_runs_utc"`
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	s, _ := c.rt.Registry().Lookup("nightly")
	want := s.Next(time.Now())
	if got.Zone != "Europe/Berlin" || len(got.NextRuns) != 3 || len(got.UTC) != 3 {
		t.Fatalf("got %+v, want 3 runs in Europe/Berlin", got)
	}
	if first := want.In(s.Location()).Format("2006-01-02T15:04:05-07:00"); got.NextRuns[0] != first || got.UTC[0] != want.UTC().Format(time.RFC3339) {
		t.Errorf("first next run %s (%s UTC), want %s", got.NextRuns[0], got.UTC[0], first)
	}
	if third := s.Next(s.Next(want)).In(s.Location()).Format("2006-01-02T15:04:05-07:00"); got.NextRuns[2] != third {
		t.Errorf("third next run %s, want %s", got.NextRuns[2], third)
	}

	// A member's are in its own zone, with its own expression.
	if _, err := c.rt.Families().Set(context.Background(), family, runtime.Member{Key: "acme", Zone: "Asia/Tokyo", Expr: "30 8 * * *"}); err != nil {
		t.Fatal(err)
	}
	resp, body = do(t, "GET", srv.URL+"/cron/api/schedules/"+family+"/members/acme/next?n=2", nil, nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"zone": "Asia/Tokyo"`) || strings.Count(body, "T08:30:00+09:00") != 2 {
		t.Errorf("member's next runs: status %d: %s", resp.StatusCode, body)
	}

	for _, tc := range []struct {
		path   string
		status int
		msg    string
	}{
		{"/api/schedules/nightly/next?n=0", http.StatusBadRequest, "n must be a number from 1 to 100"},
		{"/api/schedules/nightly/next?n=101", http.StatusBadRequest, "n must be a number from 1 to 100"},
		{"/api/schedules/nosuch/next", http.StatusNotFound, "no schedule is called nosuch"},
		{"/api/schedules/" + family + "/next", http.StatusBadRequest, "is a family: each member has its own next runs"},
		{"/api/schedules/" + family + "/members/nobody/next", http.StatusNotFound, `has no member \"nobody\"`},
		{"/api/schedules/nightly/members/acme/next", http.StatusNotFound, "nightly is not a family"},
	} {
		resp, body := do(t, "GET", srv.URL+"/cron"+tc.path, nil, nil)
		if resp.StatusCode != tc.status || !strings.Contains(body, tc.msg) {
			t.Errorf("GET %s: %d %s, want %d with %q", tc.path, resp.StatusCode, body, tc.status, tc.msg)
		}
	}
}

func TestTheClientsClaimedActorIsRecordedUnlessTheHostNamesOne(t *testing.T) {
	t.Parallel()
	claim := http.Header{admin.ActorHeader: {"  bob\t@laptop  "}, "Content-Type": {"application/json"}}
	pausedBy := func(t *testing.T, srv string, c *fixture) string {
		t.Helper()
		resp, body := do(t, "POST", srv+"/cron/api/schedules/nightly/pause", claim, strings.NewReader(`{"reason": "r"}`))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("pause: %d %s", resp.StatusCode, body)
		}
		snap, err := c.rt.Monitor().SnapshotOf(context.Background(), []string{"nightly"}, 0)
		if err != nil || snap.Schedules[0].Paused == nil {
			t.Fatalf("not paused: %v", err)
		}
		return snap.Schedules[0].Paused.Actor
	}
	t.Run("claimed", func(t *testing.T) {
		t.Parallel()
		c, srv := adminSetup(t, admin.Options{})
		if got := pausedBy(t, srv.URL, c); got != "bob@laptop" {
			t.Errorf("actor %q, want the claim without its control characters", got)
		}
	})
	t.Run("host", func(t *testing.T) {
		t.Parallel()
		c, srv := adminSetup(t, admin.Options{Actor: func(*http.Request) string { return "alice" }})
		if got := pausedBy(t, srv.URL, c); got != "alice" {
			t.Errorf("actor %q, want the host's alice over the claim", got)
		}
	})
	t.Run("bounded", func(t *testing.T) {
		t.Parallel()
		req, _ := http.NewRequest("GET", "/", nil)
		req.Header.Set(admin.ActorHeader, strings.Repeat("é", 80))
		if got := admin.ClaimedActor(req); len(got) > 100 || !strings.HasPrefix(got, "éé") || strings.ContainsRune(got, '\uFFFD') {
			t.Errorf("ClaimedActor of 160 bytes = %q (%d bytes), want at most 100 bytes of whole runes", got, len(got))
		}
	})
}
