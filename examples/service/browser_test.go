package main

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

var updateScreenshot = flag.Bool("update-screenshot", false, "also write the admin page screenshot to docs/admin.png for the README")

// Where the screenshots go, relative to this package. The artifacts
// directory is ignored by git; docs/admin.png is the README's picture.
const (
	artifactsDir  = "../../testdata/artifacts"
	docScreenshot = "../../docs/admin.png"
)

// chromiumPath finds a Chromium to drive, or skips the test; with
// BELFRY_REQUIRE_CHROMIUM=1 (as CI sets) a missing browser fails it.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("BELFRY_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	const msg = "no Chromium found (install Debian's chromium, or set BELFRY_CHROMIUM to a Chrome binary)"
	if os.Getenv("BELFRY_REQUIRE_CHROMIUM") == "1" {
		t.Fatal(msg + "; BELFRY_REQUIRE_CHROMIUM=1 makes this a failure")
	}
	t.Skip(msg)
	return ""
}

// TestAdminInBrowser drives the admin page of a running service in headless
// Chromium the way an operator would: the schedules are listed, Trigger
// on send-digest lands on its detail page, and the manual occurrence shows
// up there and then succeeds. It keeps screenshots of both pages.
func TestAdminInBrowser(t *testing.T) {
	t.Parallel()
	browser := chromiumPath(t)
	redisURL := startRedis(t)
	// Three replicas, as make demo runs them, so the screenshot shows what
	// a visitor of the demo sees.
	var reps []*replica
	for _, name := range []string{"demo-1", "demo-2", "demo-3"} {
		reps = append(reps, startReplica(t, redisURL, name, "-lease-ttl", "5s"))
	}
	web := reps[0]
	waitFor(t, 15*time.Second, "a leader and all three replicas", func() bool {
		s, err := web.status(t)
		return err == nil && s.Leader != nil && len(s.Replicas) == 3
	})

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 520),
	)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	ctx, cancelTab := chromedp.NewContext(allocCtx, chromedp.WithErrorf(t.Logf))
	defer cancelTab()

	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	rowSel := chromedp.CSSAll(`#schedules tbody tr[data-schedule]`)
	must("load the admin page", chromedp.Do(ctx,
		chromedp.Navigate(web.base),
		chromedp.WaitVisible(chromedp.CSS(`#schedules tbody tr[data-schedule="heartbeat"]`)),
	))
	rows, err := chromedp.Run(ctx, chromedp.AttributesAll(rowSel))
	must("read the schedule rows", err)
	var names []string
	for _, attrs := range rows {
		names = append(names, attrs["data-schedule"])
	}
	if want := []string{"heartbeat", "prune-soft-deleted", "reconcile-payments", "send-digest"}; !slices.Equal(names, want) {
		t.Fatalf("schedule rows %v, want %v", names, want)
	}

	// The Trigger button is a plain form post answered by a redirect, so
	// the page works without JavaScript.
	resp, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(`button[value="send-digest"]`)))
	must("click Trigger on send-digest", err)
	if resp.Status != 200 {
		t.Fatalf("after Trigger: HTTP %d, want 200", resp.Status)
	}
	manualRow := chromedp.CSS(`#history tr[data-task-id*="manual"]`)
	must("see the manual occurrence", chromedp.Do(ctx, chromedp.WaitVisible(manualRow)))
	loc, err := chromedp.Run(ctx, chromedp.Location())
	must("read the location", err)
	if !strings.HasSuffix(loc, "/cron/schedules/send-digest?triggered=ok") {
		t.Errorf("landed on %s, want the send-digest detail page with triggered=ok", loc)
	}
	notice, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`.notice`)))
	must("read the notice", err)
	if !strings.Contains(notice, "Triggered") {
		t.Errorf("notice %q, want it to confirm the trigger", notice)
	}
	id, err := chromedp.Run(ctx, chromedp.AttributeValue(manualRow, "data-task-id"))
	must("read the task ID", err)
	if !strings.HasPrefix(id.Value, "cron:send-digest:manual:") {
		t.Errorf("manual row task ID %q, want cron:send-digest:manual:…", id.Value)
	}

	// The page does not refresh itself; an operator reloads to see the run
	// finish.
	detail := web.base + "schedules/send-digest"
	outcome := chromedp.CSS(`#history tr[data-task-id="` + id.Value + `"] td:nth-child(2)`)
	waitFor(t, 20*time.Second, "the manual occurrence to succeed on the page", func() bool {
		if err := chromedp.Do(ctx, chromedp.Navigate(detail)); err != nil {
			return false
		}
		rows, err := chromedp.Run(ctx, chromedp.Nodes(outcome, chromedp.AtLeast(0)))
		if err != nil || len(rows) == 0 {
			return false
		}
		text, err := chromedp.Run(ctx, chromedp.Text(outcome))
		return err == nil && strings.TrimSpace(text) == "succeeded"
	})
	screenshot(t, ctx, "admin-detail.png", false)

	// Back on the index, the digest's row shows the manual run, and the
	// heartbeat row a full set of recent successes.
	waitFor(t, 20*time.Second, "the index to show the runs", func() bool {
		if err := chromedp.Do(ctx, chromedp.Navigate(web.base)); err != nil {
			return false
		}
		hb, err := chromedp.Run(ctx, chromedp.Nodes(chromedp.CSSAll(`tr[data-schedule="heartbeat"] .badge.succeeded`), chromedp.AtLeast(0)))
		if err != nil || len(hb) < 5 {
			return false
		}
		digest, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`tr[data-schedule="send-digest"]`)))
		return err == nil && strings.Contains(digest, "succeeded*")
	})
	screenshot(t, ctx, "admin.png", *updateScreenshot)
}

// screenshot saves the whole page as a test artifact and, when doc is set,
// as the README's picture.
func screenshot(t *testing.T, ctx context.Context, name string, doc bool) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.MkdirAll(artifactsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(artifactsDir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
	if doc {
		if err := os.WriteFile(docScreenshot, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", docScreenshot)
	}
}
