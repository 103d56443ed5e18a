package admin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
	"github.com/belfry/belfry/runtime/admin"
)

// pausedTicks runs a per-second schedule, pauses it and waits until slots
// are recorded paused; it returns the admin mounted under /cron/.
func pausedTicks(t *testing.T) (*fixture, *httptest.Server) {
	t.Helper()
	c := newFixture(t, sharedRedis(t), registry.Schedule{Name: "tick", Expr: "* * * * * *"})
	ctx := context.Background()
	waitFor(t, 10*time.Second, "a run before the pause", func() bool {
		h, _ := c.rt.History(ctx, "tick", 1)
		return len(h) == 1 && h[0].Outcome == runtime.OutcomeSucceeded
	})
	if err := c.rt.Pause(ctx, "tick", "maintenance"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "slots recorded paused", func() bool {
		h, _ := c.rt.History(ctx, "tick", 1)
		return len(h) == 1 && h[0].Outcome == runtime.OutcomePaused
	})
	srv := httptest.NewServer(http.StripPrefix("/cron", admin.New(c.rt, admin.Options{})))
	t.Cleanup(srv.Close)
	return c, srv
}

// A paused slot was never enqueued: its record claims no task and no
// enqueue time, in the JSON and on the page, and says when it was
// recorded. A slot that ran keeps both.
func TestPausedSlotsClaimNoTask(t *testing.T) {
	t.Parallel()
	c, srv := pausedTicks(t)
	_, body := do(t, "GET", srv.URL+"/cron/api/schedules/tick", nil, nil)
	var got struct {
		History []map[string]any `json:"history"`
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	var paused, ran int
	for _, rec := range got.History {
		id, hasID := rec["task_id"]
		switch rec["outcome"] {
		case "paused":
			paused++
			if !hasID || id != nil {
				t.Errorf("a paused record has task_id %v, want null: %v", id, rec)
			}
			if _, ok := rec["enqueued_at"]; ok {
				t.Errorf("a paused record has an enqueued_at: %v", rec)
			}
			if _, ok := rec["recorded_at"]; !ok || !strings.HasPrefix(rec["occurrence_id"].(string), c.idPrefix("tick")+":") {
				t.Errorf("a paused record lacks recorded_at or its occurrence_id: %v", rec)
			}
		case "succeeded":
			ran++
			if s, _ := id.(string); s == "" || s != rec["occurrence_id"] || rec["enqueued_at"] == nil {
				t.Errorf("a record that ran lacks its task_id or enqueued_at: %v", rec)
			}
		}
	}
	if paused == 0 || ran == 0 {
		t.Fatalf("history has %d paused and %d succeeded records, want both:\n%s", paused, ran, body)
	}

	_, page := do(t, "GET", srv.URL+"/cron/schedules/tick", nil, nil)
	rows := regexp.MustCompile(`(?s)<tr[^>]*data-outcome="paused"[^>]*>.*?</tr>`).FindAllString(page, -1)
	if len(rows) == 0 {
		t.Fatalf("the page shows no paused row:\n%s", page)
	}
	for _, row := range rows {
		if strings.Contains(row, "data-task-id") || strings.Contains(row, `<code class="id">`) || !strings.Contains(row, "not enqueued") {
			t.Errorf("a paused row claims a task or does not say it was not enqueued:\n%s", row)
		}
	}
}

// A paused schedule's next run says it is paused: its next slot will be
// recorded paused, not run, so the page must not say it runs "now" or "in
// 1 s".
func TestPausedScheduleNextRunSaysPaused(t *testing.T) {
	t.Parallel()
	_, srv := pausedTicks(t)
	cells := map[string]*regexp.Regexp{
		"":               regexp.MustCompile(`(?s)<tr data-schedule="tick".*?</td>\s*<td>(.*?)</td>`),
		"schedules/tick": regexp.MustCompile(`(?s)<dt>Next run</dt><dd>(.*?)</dd>`),
	}
	for path, re := range cells {
		_, body := do(t, "GET", srv.URL+"/cron/"+path, nil, nil)
		m := re.FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("/%s has no next-run cell:\n%s", path, body)
		}
		cell := m[1]
		if !strings.Contains(cell, `<span class="badge paused">paused</span>`) || !strings.Contains(cell, "recorded paused, not run") {
			t.Errorf("/%s: a paused schedule's next run does not say it is paused:\n%s", path, cell)
		}
		if regexp.MustCompile(`\bnow\b|\bin \d`).MatchString(cell) {
			t.Errorf("/%s: a paused schedule's next run says it comes:\n%s", path, cell)
		}
	}
}
