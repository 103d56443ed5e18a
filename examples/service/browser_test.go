package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/belfry/belfry/examples/service/jobs"
	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
	"github.com/belfry/belfry/runtime/admin"
	"github.com/chromedp/chromedp"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
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

// newBrowser starts a headless Chromium with a tab of the given width,
// closed when the test ends.
func newBrowser(t *testing.T, timeout time.Duration, width, height int, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(width, height),
	)
	opts = append(opts, extra...)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancelTab := chromedp.NewContext(allocCtx, chromedp.WithErrorf(t.Logf))
	t.Cleanup(cancelTab)
	return ctx
}

// must fails the test on a browser error, naming the step.
func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// textOf returns the visible text of the first node sel matches, waiting
// for one to exist. It reads the live page in one script: the page
// replaces its rows on every refresh (500 ms here), and a node found by one
// DevTools call and read by the next may have been replaced in between,
// which reads as empty text.
func textOf(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	script := fmt.Sprintf(`(() => { const n = document.querySelector(%q); return n === null ? null : n.innerText })()`, sel)
	var text *string
	waitFor(t, 10*time.Second, "the page to show "+sel, func() bool {
		var err error
		text, err = chromedp.Run(ctx, chromedp.Evaluate[*string](script))
		must(t, "read "+sel, err)
		return text != nil
	})
	return strings.TrimSpace(*text)
}

// clickLive clicks the first node sel matches, in one script, once one
// exists. chromedp.Click finds the node with one DevTools call and clicks
// it with the next, and the page's refresh (500 ms here) may replace the
// node in between: "Could not find node with given id". In one script the
// node clicked is the one found.
func clickLive(sel string) chromedp.Action[chromedp.Void] {
	script := fmt.Sprintf(`(() => { const n = document.querySelector(%q); if (n === null) return false; n.click(); return true })()`, sel)
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		for {
			clicked, err := chromedp.Evaluate[bool](script)(ctx, t)
			if err != nil || clicked {
				return chromedp.Void{}, err
			}
			select {
			case <-ctx.Done():
				return chromedp.Void{}, fmt.Errorf("no %s to click: %w", sel, ctx.Err())
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
}

// waitForRefresh waits until the page has refreshed itself: its "as of"
// time has changed in place.
func waitForRefresh(t *testing.T, ctx context.Context) {
	t.Helper()
	asOf := textOf(t, ctx, `#updated`)
	waitFor(t, 10*time.Second, "the page to refresh itself", func() bool {
		text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#updated`)))
		return err == nil && strings.TrimSpace(text) != asOf
	})
}

// present reports whether sel matches a node now, without waiting.
func present(ctx context.Context, sel string) bool {
	nodes, err := chromedp.Run(ctx, chromedp.Nodes(chromedp.CSSAll(sel), chromedp.AtLeast(0)))
	return err == nil && len(nodes) > 0
}

// TestAdminInBrowser drives the admin page of the example service in
// headless Chromium the way an operator would: the schedules are listed,
// Run now on send-digest asks for confirmation and then lands on its detail
// page, and the manual occurrence shows up there and then succeeds, on the
// page as it refreshes itself. It keeps screenshots of both pages.
func TestAdminInBrowser(t *testing.T) {
	t.Parallel()
	ctx := newBrowser(t, 60*time.Second, 1280, 520)
	redisURL := startRedis(t)
	// Three replicas, as make demo runs them.
	var reps []*replica
	for _, name := range []string{"demo-1", "demo-2", "demo-3"} {
		reps = append(reps, startReplica(t, redisURL, name, "-lease-ttl", "5s"))
	}
	web := reps[0]
	waitFor(t, 15*time.Second, "a leader and all three replicas", func() bool {
		s, err := web.status(t)
		return err == nil && s.Leader != nil && len(s.Replicas) == 3
	})

	must(t, "load the admin page", chromedp.Do(ctx,
		chromedp.Navigate(web.base),
		chromedp.WaitVisible(chromedp.CSS(`#schedules tbody tr[data-schedule="heartbeat"]`)),
	))
	rows, err := chromedp.Run(ctx, chromedp.AttributesAll(chromedp.CSSAll(`#schedules tbody tr[data-schedule]`)))
	must(t, "read the schedule rows", err)
	var names []string
	for _, attrs := range rows {
		names = append(names, attrs["data-schedule"])
	}
	slices.Sort(names)
	if want := []string{"archive-events", "heartbeat", "prune-soft-deleted", "reconcile-payments", "send-digest", "weekly-report"}; !slices.Equal(names, want) {
		t.Fatalf("schedule rows %v, want %v", names, want)
	}

	// Run now is a link to a confirmation form; the form posts and is
	// answered by a redirect, so the page works without JavaScript.
	must(t, "click Run now on send-digest", chromedp.Do(ctx,
		clickLive(`tr[data-schedule="send-digest"] a[data-action="run"]`),
		chromedp.WaitVisible(chromedp.CSS(`form.confirm button[type="submit"]`)),
	))
	if q := textOf(t, ctx, `form.confirm h2`); q != "Run send-digest now?" {
		t.Errorf("confirmation asks %q", q)
	}
	resp, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(`form.confirm button[type="submit"]`)))
	must(t, "confirm Run now", err)
	if resp.Status != 200 {
		t.Fatalf("after Run now: HTTP %d, want 200", resp.Status)
	}
	manualRow := `#history tr[data-task-id*="manual"]`
	must(t, "see the manual occurrence", chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(manualRow))))
	loc, err := chromedp.Run(ctx, chromedp.Location())
	must(t, "read the location", err)
	if !strings.HasSuffix(loc, "/cron/schedules/send-digest?triggered=ok") {
		t.Errorf("landed on %s, want the send-digest detail page with triggered=ok", loc)
	}
	if notice := textOf(t, ctx, `.notice`); !strings.Contains(notice, "Triggered") {
		t.Errorf("notice %q, want it to confirm the trigger", notice)
	}
	id, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS(manualRow), "data-task-id"))
	must(t, "read the task ID", err)
	if want := "cron:" + exampleNamespace() + "/send-digest:manual:"; !strings.HasPrefix(id.Value, want) {
		t.Errorf("manual row task ID %q, want %s…", id.Value, want)
	}

	// No reload: the page refreshes its own data.
	must(t, "see the manual occurrence succeed without a reload", chromedp.Do(ctx,
		chromedp.WaitVisible(chromedp.CSS(`#history tr[data-task-id="`+id.Value+`"][data-outcome="succeeded"]`))))
	screenshot(t, ctx, "admin-detail.png", false)

	// Back on the index, the digest's row shows the manual run, and the
	// heartbeat row its five recent runs, the older ones successes (the
	// newest, or under load the one before it, may still be enqueued or
	// running: it fires every second).
	must(t, "open the index", chromedp.Do(ctx, chromedp.Navigate(web.base)))
	waitFor(t, 20*time.Second, "the index to show the runs", func() bool {
		all, err := chromedp.Run(ctx, chromedp.Nodes(chromedp.CSSAll(`tr[data-schedule="heartbeat"] td.recent .badge`), chromedp.AtLeast(0)))
		if err != nil || len(all) != 5 {
			return false
		}
		ok, err := chromedp.Run(ctx, chromedp.Nodes(chromedp.CSSAll(`tr[data-schedule="heartbeat"] td.recent .badge.mini.succeeded`), chromedp.AtLeast(0)))
		if err != nil || len(ok) < 3 {
			return false
		}
		digest, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`tr[data-schedule="send-digest"] td.recent`)))
		return err == nil && strings.Contains(digest, "succeeded") && strings.Contains(digest, "run now")
	})
	screenshot(t, ctx, "admin-example.png", false)

	// The family is one row; its page lists the seeded tenants, searches
	// them with a plain form and links each one's page, where the
	// per-second member's runs appear.
	must(t, "open the family's page", chromedp.Do(ctx,
		clickLive(`tr[data-schedule="weekly-report"] a.name`),
		chromedp.WaitVisible(chromedp.CSS(`#members tr[data-member="live-demo"]`)),
	))
	members, err := chromedp.Run(ctx, chromedp.Nodes(chromedp.CSSAll(`#members tr[data-member]`)))
	must(t, "read the member rows", err)
	if len(members) != len(jobs.SeedTenants) {
		t.Errorf("the family's page lists %d members, want the %d seeded", len(members), len(jobs.SeedTenants))
	}
	must(t, "search the members", chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS(`#q`), "acm"),
		chromedp.Submit(chromedp.CSS(`#q`)),
		chromedp.WaitVisible(chromedp.CSS(`a.button[href="?"]`)),
	))
	found, err := chromedp.Run(ctx, chromedp.Nodes(chromedp.CSSAll(`#members tr[data-member]`)))
	must(t, "read the search's rows", err)
	if len(found) != 1 || found[0].AttributeValue("data-member") != "acme" {
		t.Errorf("the search for acm lists %d members, want acme alone", len(found))
	}
	must(t, "open live-demo's page", chromedp.Do(ctx,
		chromedp.Navigate(web.base+"schedules/weekly-report/members/live-demo"),
		chromedp.WaitVisible(chromedp.CSS(`#history tr[data-outcome="succeeded"]`)),
	))
	screenshot(t, ctx, "admin-family-member.png", false)
}

// operatorService is a service of the test's own, in this process: a
// runtime, asynq workers and the admin against a private Redis, with the
// jobs an operator has to deal with.
type operatorService struct {
	rt   *runtime.Runtime
	base string // http://127.0.0.1:port/cron/
}

const (
	panicText   = `template "weekly" is missing`
	failureText = "upstream ledger answered 503 Service Unavailable"
	pauseReason = "waiting for the mail provider's fix"
)

func startOperatorService(t *testing.T) *operatorService {
	t.Helper()
	opts, err := redis.ParseURL(startRedis(t))
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { rdb.Close() })
	var ledgerRuns atomic.Int64
	reg := registry.MustNew(
		// Fails its first scheduled slot, as a night whose upstream was
		// down; every later run, a re-run included, succeeds.
		registry.Schedule{Name: "sync-ledger", Expr: "*/3 * * * * *", Queue: "default", MaxRetry: 0,
			Handler: func(_ context.Context, occ registry.Occurrence) error {
				if !occ.Manual && ledgerRuns.Add(1) == 1 {
					return errors.New(failureText)
				}
				return nil
			}},
		registry.Schedule{Name: "render-reports", Expr: "@every 4s", Queue: "default", MaxRetry: 0,
			Handler: func(context.Context, registry.Occurrence) error { panic(panicText) }},
		registry.Schedule{Name: "heartbeat", Expr: "* * * * * *", Queue: "default", Timeout: time.Second,
			Handler: func(context.Context, registry.Occurrence) error { return nil }},
		registry.Schedule{Name: "send-digest", Expr: "0 8 * * *", Zone: "Europe/London", Queue: "default",
			Handler: func(context.Context, registry.Occurrence) error { return nil }},
		registry.Schedule{Name: "prune-soft-deleted", Expr: "17 3 * * *", Queue: "maintenance", Timeout: 20 * time.Minute,
			MaxRetry: 1, Handler: func(context.Context, registry.Occurrence) error { return nil }},
	)
	rt, err := runtime.New(reg, runtime.Options{Redis: rdb, Replica: "web-1", LeaseTTL: 2 * time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	workers := asynq.NewServerFromRedisClient(rdb, asynq.Config{Queues: map[string]int{"default": 1, "maintenance": 1},
		Concurrency: 4, TaskCheckInterval: 50 * time.Millisecond, LogLevel: asynq.FatalLevel})
	mux := asynq.NewServeMux()
	rt.RegisterHandlers(mux)
	if err := workers.Start(mux); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { rt.Run(ctx); close(done) }()
	web := http.NewServeMux()
	web.Handle("/cron/", http.StripPrefix("/cron", admin.New(rt, admin.Options{
		Actor: func(*http.Request) string { return "alice" }, Refresh: 500 * time.Millisecond})))
	srv := httptest.NewServer(web)
	t.Cleanup(func() { srv.Close(); cancel(); <-done; workers.Shutdown(); rt.Close() })
	waitFor(t, 10*time.Second, "the service to lead", rt.Leadership().Leading)
	return &operatorService{rt: rt, base: srv.URL + "/cron/"}
}

// TestAdminOperatorFlowsInBrowser is what an operator does on the page in
// a bad week, in headless Chromium: a panicking job shows as failed with
// its panic text; the failed slot of another is re-run from its history
// row and the re-run succeeds on the failed slot; a schedule is paused with
// a reason, shows the paused badge with who, when and why, and is resumed.
// Every step waits on the page refreshing itself, never on a reload.
func TestAdminOperatorFlowsInBrowser(t *testing.T) {
	t.Parallel()
	ctx := newBrowser(t, 90*time.Second, 1400, 720)
	svc := startOperatorService(t)

	t.Log("a panicking job shows as failed, with its panic text")
	must(t, "load the admin page", chromedp.Do(ctx, chromedp.Navigate(svc.base),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-schedule="render-reports"][data-status="failing"]`))))
	if got := textOf(t, ctx, `tr[data-schedule="render-reports"] .excerpt`); got != "panic: "+panicText {
		t.Errorf("render-reports's last failure reads %q, want the panic value", got)
	}
	// Failing rows come first. sync-ledger's first slot fails too, so it
	// may be among them, in either order; render-reports must come before
	// every row that is not failing. Read in one script: a refresh may
	// replace the rows between two DevTools calls.
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`Array.from(document.querySelectorAll('#schedules tbody tr')).map(r => r.dataset.schedule + ' ' + r.dataset.status)`))
	must(t, "read the rows' order", err)
	if i, healthy := slices.Index(rows, "render-reports failing"), slices.IndexFunc(rows, func(r string) bool { return !strings.HasSuffix(r, " failing") }); i < 0 || (healthy >= 0 && healthy < i) {
		t.Errorf("rows %q: want the failing render-reports before every row that is not failing", rows)
	}
	// sync-ledger may still be failing too (its first slot fails).
	waitForRefresh(t, ctx)
	if present(ctx, `#updated .noscript`) {
		t.Error("with JavaScript on, the refreshed page says to reload")
	}
	if summary := textOf(t, ctx, `#summary`); !regexp.MustCompile(`^[12] failing · `).MatchString(summary) {
		t.Errorf("summary %q, want it to start with the failing count", summary)
	}
	must(t, "open render-reports", chromedp.Do(ctx, clickLive(`tr[data-schedule="render-reports"] a.name`),
		chromedp.WaitVisible(chromedp.CSS(`#history tr[data-outcome="failed"]`))))
	if got := textOf(t, ctx, `#history tr[data-outcome="failed"] details summary`); got != "panic: "+panicText {
		t.Errorf("the failed row's error reads %q, want the panic value", got)
	}
	must(t, "open the stack excerpt", chromedp.Do(ctx, clickLive(`#history tr[data-outcome="failed"] details summary`)))
	if stack := textOf(t, ctx, `#history tr[data-outcome="failed"] details pre`); !strings.Contains(stack, "browser_test.go") {
		t.Errorf("the stack excerpt does not locate the panic:\n%s", stack)
	}
	// An error the operator opened stays open while the page refreshes.
	openID, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS(`#history details[open]`), "data-key"))
	must(t, "read the open error's row", err)
	waitForRefresh(t, ctx)
	if !present(ctx, `#history details[open][data-key="`+openID.Value+`"]`) {
		t.Errorf("the refresh closed the error of %s", openID.Value)
	}
	screenshot(t, ctx, "admin-panic.png", false)

	t.Log("re-run the failed slot from its history row")
	must(t, "open sync-ledger", chromedp.Do(ctx, chromedp.Navigate(svc.base+"schedules/sync-ledger"),
		chromedp.WaitVisible(chromedp.CSS(`#history tr[data-outcome="failed"] a[data-action="rerun"].primary`))))
	failedRow := `#history tr[data-outcome="failed"]`
	slot, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS(failedRow), "data-slot"))
	must(t, "read the failed slot", err)
	failedSlotText := textOf(t, ctx, failedRow+` td:first-child time`)
	if got := textOf(t, ctx, failedRow+` .excerpt`); got != failureText {
		t.Errorf("the failed row's error reads %q", got)
	}
	must(t, "click Re-run", chromedp.Do(ctx, clickLive(failedRow+` a[data-action="rerun"]`),
		chromedp.WaitVisible(chromedp.CSS(`form.confirm button[type="submit"]`))))
	if q := textOf(t, ctx, `form.confirm h2`); q != "Re-run the slot "+failedSlotText+" of sync-ledger?" {
		t.Errorf("confirmation asks %q, want it to name the slot %s", q, failedSlotText)
	}
	screenshot(t, ctx, "admin-confirm-rerun.png", false)
	must(t, "confirm the re-run", chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`form.confirm button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`.notice`))))
	rerunRow := `#history tr[data-task-id^="cron:` + svc.rt.Namespace() + `/sync-ledger:rerun:` + slot.Value + `:"]`
	must(t, "see the re-run succeed", chromedp.Do(ctx,
		chromedp.WaitVisible(chromedp.CSS(rerunRow+`[data-outcome="succeeded"]`))))
	if got := textOf(t, ctx, rerunRow+` td:first-child time`); got != failedSlotText {
		t.Errorf("the re-run's slot reads %q, want the failed slot %q", got, failedSlotText)
	}
	if got := textOf(t, ctx, rerunRow+` td:nth-child(3)`); !strings.HasPrefix(got, "re-run") || !strings.HasSuffix(got, "by alice") {
		t.Errorf("the re-run row's run-by reads %q, want re-run by alice", got)
	}
	madeUp := `#history tr[data-outcome="failed"][data-slot="` + slot.Value + `"]`
	if !present(ctx, madeUp) {
		t.Errorf("the failed row of slot %s is gone; the history should keep it beside its re-run", slot.Value)
	}
	if !present(ctx, madeUp+` .made-up`) || present(ctx, madeUp+` a.primary`) {
		t.Errorf("the failed row of slot %s still asks for a re-run after one succeeded", slot.Value)
	}
	screenshot(t, ctx, "admin-rerun.png", false)

	t.Log("pause with a reason, see the badge, resume")
	must(t, "open the index", chromedp.Do(ctx, chromedp.Navigate(svc.base),
		clickLive(`tr[data-schedule="send-digest"] a[data-action="pause"]`),
		chromedp.WaitVisible(chromedp.CSS(`form.confirm input[name="reason"]`)),
		chromedp.SendKeys(chromedp.CSS(`form.confirm input[name="reason"]`), pauseReason),
	))
	screenshot(t, ctx, "admin-confirm-pause.png", false)
	must(t, "confirm the pause", chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`form.confirm button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#detail-head .paused-note`)),
	))
	screenshot(t, ctx, "admin-paused.png", false)
	note := textOf(t, ctx, `#detail-head .paused-note`)
	if !strings.HasPrefix(note, "paused by alice ") || !strings.HasSuffix(note, ": "+pauseReason) {
		t.Errorf("paused note %q, want paused by alice <when>: %s", note, pauseReason)
	}
	if got := textOf(t, ctx, `.notice`); !strings.HasPrefix(got, "Paused:") {
		t.Errorf("notice %q", got)
	}
	must(t, "see the paused badge on the index", chromedp.Do(ctx, chromedp.Navigate(svc.base),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-schedule="send-digest"][data-status="paused"] .paused-note`))))
	if summary := textOf(t, ctx, `#summary`); !strings.Contains(summary, "1 paused") {
		t.Errorf("summary %q, want 1 paused", summary)
	}
	// The zone's own offset, never a Z, on a London schedule in winter
	// and summer alike.
	if next := textOf(t, ctx, `tr[data-schedule="send-digest"] td:nth-child(2) time`); !strings.HasSuffix(next, "+00:00") && !strings.HasSuffix(next, "+01:00") {
		t.Errorf("send-digest's next run reads %q, want London's offset", next)
	}
	waitFor(t, 20*time.Second, "the heartbeat to show five recent runs", func() bool {
		hb, err := chromedp.Run(ctx, chromedp.Nodes(chromedp.CSSAll(`tr[data-schedule="heartbeat"] td.recent .badge`), chromedp.AtLeast(0)))
		return err == nil && len(hb) >= 5
	})
	screenshot(t, ctx, "admin.png", *updateScreenshot)
	must(t, "resume", chromedp.Do(ctx,
		clickLive(`tr[data-schedule="send-digest"] a[data-action="resume"]`),
		chromedp.WaitVisible(chromedp.CSS(`form.confirm button[type="submit"]`)),
		chromedp.Click(chromedp.CSS(`form.confirm button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`.notice`)),
	))
	if got := textOf(t, ctx, `#detail-head h2 .badge`); got == "paused" || present(ctx, `#detail-head .paused-note`) {
		t.Errorf("after Resume the schedule still shows paused (%q)", got)
	}
	if paused, err := svc.rt.Paused(context.Background()); err != nil || len(paused) != 0 {
		t.Errorf("after Resume: paused %v, %v", paused, err)
	}
	// A pause made elsewhere (another operator, the API) reaches the open
	// page by itself, buttons included.
	if err := svc.rt.Pause(runtime.WithActor(context.Background(), "bob"), "send-digest", "from the API"); err != nil {
		t.Fatal(err)
	}
	within, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	must(t, "see bob's pause arrive without a reload", chromedp.Do(within,
		chromedp.WaitVisible(chromedp.CSS(`#detail-head a[data-action="resume"]`))))
	if note := textOf(t, ctx, `#detail-head .paused-note`); !strings.HasPrefix(note, "paused by bob ") {
		t.Errorf("paused note %q, want bob's", note)
	}
	if err := svc.rt.Resume(context.Background(), "send-digest"); err != nil {
		t.Fatal(err)
	}

	t.Log("every button works without JavaScript")
	noJS := newBrowser(t, 60*time.Second, 1400, 720, chromedp.Flag("blink-settings", "scriptEnabled=false"))
	must(t, "load the page without JavaScript", chromedp.Do(noJS, chromedp.Navigate(svc.base),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-schedule="prune-soft-deleted"]`))))
	// The browser really runs no script: it shows what <noscript> holds.
	if !present(noJS, `#updated .noscript`) {
		t.Fatal("the browser meant to run without JavaScript runs it")
	}
	must(t, "pause without JavaScript", chromedp.Do(noJS,
		clickLive(`tr[data-schedule="prune-soft-deleted"] a[data-action="pause"]`),
		chromedp.WaitVisible(chromedp.CSS(`form.confirm input[name="reason"]`)),
		chromedp.SendKeys(chromedp.CSS(`form.confirm input[name="reason"]`), "no script"),
		chromedp.Click(chromedp.CSS(`form.confirm button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#detail-head .paused-note`)),
	))
	if note := textOf(t, noJS, `#detail-head .paused-note`); !strings.HasSuffix(note, ": no script") {
		t.Errorf("paused note without JavaScript: %q", note)
	}
	must(t, "resume without JavaScript", chromedp.Do(noJS,
		clickLive(`a[data-action="resume"]`),
		chromedp.WaitVisible(chromedp.CSS(`form.confirm button[type="submit"]`)),
		chromedp.Click(chromedp.CSS(`form.confirm button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`.notice`)),
	))
	if got := textOf(t, noJS, `.notice`); !strings.HasPrefix(got, "Resumed:") {
		t.Errorf("notice after Resume without JavaScript: %q", got)
	}
	must(t, "re-run without JavaScript", chromedp.Do(noJS, chromedp.Navigate(svc.base+"schedules/render-reports"),
		clickLive(`#history tr[data-outcome="failed"] a[data-action="rerun"]`),
		chromedp.WaitVisible(chromedp.CSS(`form.confirm button[type="submit"]`)),
		chromedp.Click(chromedp.CSS(`form.confirm button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#history tr[data-task-id*=":rerun:"]`)),
	))
	if got := textOf(t, noJS, `.notice`); !strings.HasPrefix(got, "Re-run enqueued") {
		t.Errorf("notice after Re-run without JavaScript: %q", got)
	}
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
