package admin_test

import (
	"context"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/belfry/belfry/internal/redistest"
	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
	"github.com/belfry/belfry/runtime/admin"
)

var formHeader = http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}

func alice(*http.Request) string { return "alice" }

// inHTML is s as html/template writes it in text: a + becomes &#43;.
func inHTML(s string) string { return strings.ReplaceAll(s, "+", "&#43;") }

// checkResponse makes a request and checks its status, Content-Type and
// that the body contains each of contains; it returns the body.
func checkResponse(t *testing.T, method, url string, header http.Header, body string, status int, contentType string, contains []string) string {
	t.Helper()
	resp, got := do(t, method, url, header, strings.NewReader(body))
	checkResult(t, method+" "+url, resp, got, status, contentType, contains)
	return got
}

func checkResult(t *testing.T, what string, resp *http.Response, body string, status int, contentType string, contains []string) {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("%s: status %d, want %d\n%s", what, resp.StatusCode, status, body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, contentType) {
		t.Errorf("%s: Content-Type %q, want %s", what, ct, contentType)
	}
	if status < 300 && resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("%s: no X-Content-Type-Options: nosniff", what)
	}
	for _, s := range contains {
		if !strings.Contains(body, s) {
			t.Errorf("%s: body lacks %q:\n%s", what, s, body)
		}
	}
}

// The page's buttons: each confirmation step, each form post and the
// script, with status, Content-Type and body; refusals cross-origin.
func TestPageButtonRoutes(t *testing.T) {
	t.Parallel()
	c, srv := adminSetup(t, admin.Options{Actor: alice})
	s, _ := c.rt.Registry().Lookup("nightly")
	lastNight := s.Prev(time.Now())
	slot := strconv.FormatInt(lastNight.Unix(), 10)
	notASlot := strconv.FormatInt(lastNight.Add(time.Minute).Unix(), 10)
	crossSite := http.Header{"Origin": {"https://evil.example"}, "Sec-Fetch-Site": {"cross-site"},
		"Content-Type": {"application/x-www-form-urlencoded"}}
	form := func(kv ...string) string {
		v := url.Values{}
		for i := 0; i < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return v.Encode()
	}
	base := srv.URL + "/cron/"
	for _, tt := range []struct {
		name, method, path string
		header             http.Header
		body               string
		status             int
		contentType        string
		contains           []string
		location           string
	}{
		{"confirm run", "GET", "schedules/nightly/confirm?action=run", nil, "", 200, "text/html",
			[]string{"Run nightly now?", `<form class="confirm" method="post" action="trigger">`, `name="request"`, "Cancel", `href="../nightly"`}, ""},
		{"confirm rerun", "GET", "schedules/nightly/confirm?action=rerun&slot=" + slot, nil, "", 200, "text/html",
			[]string{`action="rerun"`, `name="slot" value="` + slot + `"`, inHTML(lastNight.In(s.Location()).Format("2006-01-02T15:04:05-07:00")), "scheduled occurrence&#39;s key"}, ""},
		{"confirm pause", "GET", "schedules/nightly/confirm?action=pause", nil, "", 200, "text/html",
			[]string{`action="pause"`, `name="reason"`, `maxlength="500"`, "recorded as paused and not run"}, ""},
		{"confirm resume of a running schedule", "GET", "schedules/nightly/confirm?action=resume", nil, "", 200, "text/html",
			[]string{`action="resume"`, "nightly is not paused"}, ""},
		{"confirm rerun without a slot", "GET", "schedules/nightly/confirm?action=rerun", nil, "", 400, "text/html", []string{"needs the slot"}, ""},
		{"confirm unknown action", "GET", "schedules/nightly/confirm?action=explode", nil, "", 400, "text/html", []string{"Unknown action"}, ""},
		{"confirm unknown schedule", "GET", "schedules/nope/confirm?action=run", nil, "", 404, "text/html", []string{"No schedule is called nope"}, ""},
		{"script", "GET", "admin.js", nil, "", 200, "text/javascript", []string{"data-live", "DOMParser"}, ""},
		{"rerun", "POST", "schedules/nightly/rerun", formHeader, form("slot", slot, "request", "page-r1"), 303, "", nil, "../nightly?rerun=ok"},
		{"rerun of a non-slot", "POST", "schedules/nightly/rerun", formHeader, form("slot", notASlot, "request", "page-r2"), 303, "", nil, "../nightly?rerun=400"},
		{"rerun of garbage", "POST", "schedules/nightly/rerun", formHeader, form("slot", "yesterday"), 303, "", nil, "../nightly?rerun=400"},
		{"rerun of unknown", "POST", "schedules/nope/rerun", formHeader, form("slot", slot), 404, "text/html", []string{"no schedule is called nope"}, ""},
		{"pause", "POST", "schedules/fails/pause", formHeader, form("reason", "disk full", "request", "page-p1"), 303, "", nil, "../fails?paused=ok"},
		{"resume", "POST", "schedules/fails/resume", formHeader, form("request", "page-p2"), 303, "", nil, "../fails?resumed=ok"},
		{"pause of unknown", "POST", "schedules/nope/pause", formHeader, form("reason", "x"), 404, "text/html", nil, ""},
		{"rerun cross-origin", "POST", "schedules/nightly/rerun", crossSite, form("slot", slot), 403, "text/plain", nil, ""},
		{"pause cross-origin", "POST", "schedules/nightly/pause", crossSite, form("reason", "x"), 403, "text/plain", nil, ""},
		{"resume cross-origin", "POST", "schedules/nightly/resume", crossSite, "", 403, "text/plain", nil, ""},
		{"rerun by GET", "GET", "schedules/nightly/rerun", nil, "", 405, "text/plain", nil, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := do(t, tt.method, base+tt.path, tt.header, strings.NewReader(tt.body))
			checkResult(t, tt.method+" "+tt.path, resp, body, tt.status, tt.contentType, tt.contains)
			if loc := resp.Header.Get("Location"); loc != tt.location {
				t.Errorf("Location %q, want %q", loc, tt.location)
			}
		})
	}
	// The pause and resume above went through, with the actor.
	h, err := c.rt.History(context.Background(), "nightly", 5)
	if err != nil || len(h) == 0 || h[0].ID != c.idPrefix("nightly")+":rerun:"+slot+":page-r1" || h[0].Actor != "alice" {
		t.Errorf("after the form re-run, history starts %+v (%v); want the re-run by alice", h, err)
	}
	if paused, _ := c.rt.Paused(context.Background()); len(paused) != 0 {
		t.Errorf("after pause and resume, paused %v", paused)
	}
}

// The page serves its own script and allows no other.
func TestPageContentSecurityPolicy(t *testing.T) {
	t.Parallel()
	_, srv := adminSetup(t, admin.Options{})
	for _, path := range []string{"", "schedules/nightly", "schedules/nightly/confirm?action=run"} {
		resp, body := do(t, "GET", srv.URL+"/cron/"+path, nil, nil)
		csp := resp.Header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "unsafe-eval") {
			t.Errorf("%s: CSP %q", path, csp)
		}
		if !strings.Contains(body, `admin.js" defer></script>`) || strings.Count(body, "<script") != 1 {
			t.Errorf("%s: want exactly one script, admin.js:\n%s", path, body)
		}
	}
	_, off := adminSetup(t, admin.Options{Refresh: -1})
	if _, body := do(t, "GET", off.URL+"/cron/", nil, nil); strings.Contains(body, "<script") || strings.Contains(body, "data-refresh") {
		t.Errorf("Refresh < 0 still refreshes:\n%s", body)
	}
}

// A pause made on the page shows who made it, when and why, on the
// overview (problems first, in the summary) and on the schedule's page; a
// double-submitted pause keeps the first one's time. Hostile text in the
// reason stays text.
func TestPagePauseShowsWhoWhenAndWhy(t *testing.T) {
	t.Parallel()
	c, srv := adminSetup(t, admin.Options{Actor: alice})
	ctx := context.Background()
	if _, err := c.rt.Trigger(ctx, "fails", "setup"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the failure to be recorded", func() bool {
		h, _ := c.rt.History(ctx, "fails", 1)
		return len(h) == 1 && h[0].Outcome == runtime.OutcomeFailed
	})
	reason := `migrating <b>the</b> table`
	pause := url.Values{"reason": {reason}, "request": {"pause-1"}}.Encode()
	resp, _ := do(t, "POST", srv.URL+"/cron/schedules/nightly/pause", formHeader, strings.NewReader(pause))
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("pause: %d", resp.StatusCode)
	}
	first, _ := c.rt.Paused(ctx)
	do(t, "POST", srv.URL+"/cron/schedules/nightly/pause", formHeader, strings.NewReader(pause))
	again, _ := c.rt.Paused(ctx)
	if !again["nightly"].At.Equal(first["nightly"].At) || first["nightly"].At.IsZero() {
		t.Errorf("the double submit moved the pause from %v to %v", first["nightly"].At, again["nightly"].At)
	}

	_, body := do(t, "GET", srv.URL+"/cron/", nil, nil)
	note := "paused by alice just now: migrating &lt;b&gt;the&lt;/b&gt; table"
	for _, want := range []string{`<p class="summary" id="summary" data-live><a class="count failing" href="?status=failing">1 failing</a> · <a class="count paused" href="?status=paused">1 paused</a></p>`, note, `data-action="resume"`} {
		if !strings.Contains(body, want) {
			t.Errorf("overview lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "<b>the</b>") {
		t.Errorf("the reason is not escaped")
	}
	if i, j := strings.Index(body, `data-schedule="fails"`), strings.Index(body, `data-schedule="nightly"`); i < 0 || j < i {
		t.Errorf("the failing row is not first (fails at %d, nightly at %d)", i, j)
	}
	_, body = do(t, "GET", srv.URL+"/cron/schedules/nightly?paused=ok", nil, nil)
	for _, want := range []string{"Paused: slots that come due are recorded paused", note, `<span class="badge paused">paused</span>`} {
		if !strings.Contains(body, want) {
			t.Errorf("detail lacks %q:\n%s", want, body)
		}
	}
}

// Re-run from a history row: the row of a failed slot offers it
// prominently, a double submit re-runs once, and the re-run's row shows the
// slot it re-ran, its kind and its actor.
func TestPageRerunFromHistoryRow(t *testing.T) {
	t.Parallel()
	c, srv := adminSetup(t, admin.Options{Actor: alice})
	ctx := context.Background()
	if _, err := c.rt.Trigger(ctx, "fails", "setup"); err != nil {
		t.Fatal(err)
	}
	s, _ := c.rt.Registry().Lookup("nightly")
	lastNight := s.Prev(time.Now())
	slot := strconv.FormatInt(lastNight.Unix(), 10)
	// The night's first re-run fails (fails's handler always does); use
	// nightly, whose handler succeeds, for the re-run itself.
	for range 2 {
		resp, _ := do(t, "POST", srv.URL+"/cron/schedules/nightly/rerun", formHeader,
			strings.NewReader(url.Values{"slot": {slot}, "request": {"rerun-twice"}}.Encode()))
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "../nightly?rerun=ok" {
			t.Fatalf("re-run: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	waitFor(t, 10*time.Second, "the re-run to succeed", func() bool {
		h, _ := c.rt.History(ctx, "nightly", 5)
		return len(h) == 1 && h[0].Outcome == runtime.OutcomeSucceeded
	})
	if n := c.manualRuns(); n != 1 {
		t.Errorf("the double-submitted re-run ran %d times, want 1", n)
	}
	_, body := do(t, "GET", srv.URL+"/cron/schedules/nightly?rerun=ok", nil, nil)
	for _, want := range []string{
		"Re-run enqueued",
		`data-task-id="` + c.idPrefix("nightly") + `:rerun:` + slot + `:rerun-twice" data-slot="` + slot + `" data-outcome="succeeded"`,
		`<span class="badge kind">re-run</span><span class="sub">by alice</span>`,
		inHTML(lastNight.In(s.Location()).Format("2006-01-02T15:04:05-07:00")),
		`data-action="rerun" href="./nightly/confirm?action=rerun&amp;slot=` + slot + `"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("detail lacks %q:\n%s", want, body)
		}
	}
	waitFor(t, 10*time.Second, "the failure to be recorded", func() bool {
		h, _ := c.rt.History(ctx, "fails", 1)
		return len(h) == 1 && h[0].Outcome == runtime.OutcomeFailed
	})
	_, body = do(t, "GET", srv.URL+"/cron/schedules/fails", nil, nil)
	// fails's row is a run-now occurrence: its slot is the click, not a
	// slot of the schedule, so it has no Re-run; its error is shown.
	if strings.Contains(body, `data-action="rerun"`) || !strings.Contains(body, `<span class="badge kind">run now</span>`) ||
		!strings.Contains(body, "&lt;script&gt;alert(&#34;pwned&#34;)&lt;/script&gt;") {
		t.Errorf("fails detail:\n%s", body)
	}
	_, body = do(t, "GET", srv.URL+"/cron/schedules/nightly?rerun=400", nil, nil)
	if !strings.Contains(body, "Re-run refused: that is not a past slot of this schedule.") {
		t.Errorf("the refusal word is not explained:\n%s", body)
	}
}

// Read-only: no buttons, and every confirmation and form answers 403.
func TestPageReadOnly(t *testing.T) {
	t.Parallel()
	c, srv := adminSetup(t, admin.Options{ReadOnly: true})
	s, _ := c.rt.Registry().Lookup("nightly")
	slot := strconv.FormatInt(s.Prev(time.Now()).Unix(), 10)
	for _, path := range []string{"", "schedules/nightly"} {
		_, body := do(t, "GET", srv.URL+"/cron/"+path, nil, nil)
		// The search form GETs; no form that POSTs is offered.
		for _, absent := range []string{"<button", "confirm?", "data-action", `method="post"`} {
			if strings.Contains(body, absent) {
				t.Errorf("read-only %q shows %q", path, absent)
			}
		}
	}
	for _, tt := range []struct{ method, path, body string }{
		{"GET", "schedules/nightly/confirm?action=run", ""},
		{"GET", "schedules/nightly/confirm?action=rerun&slot=" + slot, ""},
		{"GET", "schedules/nightly/confirm?action=pause", ""},
		{"GET", "schedules/nightly/confirm?action=resume", ""},
		{"POST", "schedules/nightly/trigger", "request=ro-1"},
		{"POST", "schedules/nightly/rerun", "slot=" + slot},
		{"POST", "schedules/nightly/pause", "reason=x"},
		{"POST", "schedules/nightly/resume", ""},
	} {
		resp, body := do(t, tt.method, srv.URL+"/cron/"+tt.path, formHeader, strings.NewReader(tt.body))
		if resp.StatusCode != http.StatusForbidden || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
			!strings.Contains(body, "read-only") {
			t.Errorf("read-only %s %s: %d %s\n%s", tt.method, tt.path, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
	}
	if paused, _ := c.rt.Paused(context.Background()); len(paused) != 0 {
		t.Errorf("read-only pause went through: %v", paused)
	}
}

// Without Redis the page still lists the schedules with their next runs,
// says the scheduler is disabled, and offers no button that could only
// fail.
func TestPageWithoutRedis(t *testing.T) {
	t.Parallel()
	reg := registry.MustNew(registry.Schedule{Name: "nightly", Expr: "17 3 * * *", Zone: "Europe/London",
		Handler: func(context.Context, registry.Occurrence) error { return nil }})
	rt, err := runtime.New(reg, runtime.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(admin.New(rt, admin.Options{}))
	t.Cleanup(srv.Close)
	body := checkResponse(t, "GET", srv.URL+"/", nil, "", 200, "text/html",
		[]string{"scheduler disabled", `<p class="summary" id="summary" data-live><a class="count disabled" href="?status=disabled">1 disabled</a></p>`, "at 03:17 every day, Europe/London"})
	for _, absent := range []string{"data-action", "confirm?"} {
		if strings.Contains(body, absent) {
			t.Errorf("the disabled page offers %q", absent)
		}
	}
	resp, _ := do(t, "POST", srv.URL+"/schedules/nightly/pause", formHeader, strings.NewReader("reason=x"))
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "../nightly?paused=503" {
		t.Errorf("pause without Redis: %d to %q, want 303 to ../nightly?paused=503", resp.StatusCode, resp.Header.Get("Location"))
	}
	checkResponse(t, "GET", srv.URL+"/schedules/nightly?paused=503", nil, "", 200, "text/html",
		[]string{"Pause failed: the scheduler is disabled or Redis is unreachable."})
}

// A schedule whose queue no asynq server listens to is called out on the
// page, above the table and on its row, not only as late later on.
func TestPageNamesAQueueWithoutWorkers(t *testing.T) {
	t.Parallel()
	rdb := sharedRedis(t)
	queue := redistest.Uniq("nobody-listens")
	rt, err := runtime.New(registry.MustNew(registry.Schedule{Name: "nightly", Expr: "17 3 * * *", Queue: queue,
		Handler: func(context.Context, registry.Occurrence) error { return nil }}),
		runtime.Options{Redis: rdb, Namespace: redistest.Uniq("ns")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	srv := httptest.NewServer(admin.New(rt, admin.Options{}))
	t.Cleanup(srv.Close)
	checkResponse(t, "GET", srv.URL+"/", nil, "", 200, "text/html", []string{
		`<p class="warning" role="alert">No asynq server listens to queue &#34;` + queue + `&#34;: occurrences of nightly are enqueued and wait.`,
		`<span class="warn-note">no worker listens to queue ` + queue + `</span>`,
	})
	checkResponse(t, "GET", srv.URL+"/schedules/nightly", nil, "", 200, "text/html", []string{
		`<span class="warn-note">no worker listens to queue ` + queue + `</span>`,
	})
}

// Forget deletes state nothing else holds, so it asks first like every
// other button; only a removed schedule can be forgotten.
func TestPageForgetAsksFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := sharedRedis(t)
	ns, queue := redistest.Uniq("ns"), redistest.Uniq("q")
	noop := func(context.Context, registry.Occurrence) error { return nil }
	old, err := runtime.New(registry.MustNew(registry.Schedule{Name: "gone", Expr: "17 3 * * *", Queue: queue, Handler: noop}),
		runtime.Options{Redis: rdb, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.Trigger(ctx, "gone", ""); err != nil {
		t.Fatal(err)
	}
	rt, err := runtime.New(registry.MustNew(registry.Schedule{Name: "nightly", Expr: "17 3 * * *", Queue: queue, Handler: noop}),
		runtime.Options{Redis: rdb, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(admin.New(rt, admin.Options{}))
	t.Cleanup(srv.Close)
	readOnly := httptest.NewServer(admin.New(rt, admin.Options{ReadOnly: true}))
	t.Cleanup(readOnly.Close)

	checkResponse(t, "GET", srv.URL+"/", nil, "", 200, "text/html", []string{`data-action="forget" href="orphans/gone/confirm"`})
	checkResponse(t, "GET", srv.URL+"/orphans/gone/confirm", nil, "", 200, "text/html",
		[]string{"Forget gone?", `<form class="confirm" method="post" action="forget">`, "starts from now", `href="../../"`})
	checkResponse(t, "GET", srv.URL+"/orphans/nightly/confirm", nil, "", 404, "text/html", []string{"No removed schedule is called nightly."})
	checkResponse(t, "GET", readOnly.URL+"/orphans/gone/confirm", nil, "", 403, "text/html", []string{"read-only"})
	if _, body := do(t, "GET", readOnly.URL+"/", nil, nil); strings.Contains(body, `data-action="forget"`) {
		t.Error("the read-only page offers Forget")
	}
	resp, _ := do(t, "POST", srv.URL+"/orphans/gone/forget", formHeader, strings.NewReader("request=f1"))
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "../../?forgot=ok" {
		t.Errorf("forget: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if orphans, err := rt.Orphans(ctx); err != nil || len(orphans) != 0 {
		t.Errorf("after Forget: orphans %v, %v", orphans, err)
	}
}

// Every time on the page is written one way, RFC 3339 in the schedule's
// zone (Z in UTC, the offset elsewhere): none without its zone, as the
// last success and the history's columns once were.
func TestPageTimesNameTheirZone(t *testing.T) {
	t.Parallel()
	c, srv := adminSetup(t, admin.Options{})
	ctx := context.Background()
	for _, name := range []string{"fails", "nightly"} {
		if _, err := c.rt.Trigger(ctx, name, "setup"); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "both runs to end", func() bool {
		f, _ := c.rt.History(ctx, "fails", 1)
		n, _ := c.rt.History(ctx, "nightly", 1)
		return len(f) == 1 && f[0].Outcome == runtime.OutcomeFailed && len(n) == 1 && n[0].Outcome == runtime.OutcomeSucceeded
	})
	zoneless := regexp.MustCompile(`\d{4}-\d\d-\d\d[ T]\d\d:\d\d(:\d\d)?(\.\d+)?([^\dZ+.:-]|$)`)
	timeText := regexp.MustCompile(`<time[^>]*>([^<]*)</time>`)
	rfc3339 := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(Z|[+-]\d\d:\d\d)$`)
	for _, path := range []string{"", "schedules/fails", "schedules/nightly"} {
		_, body := do(t, "GET", srv.URL+"/cron/"+path, nil, nil)
		body = html.UnescapeString(body)
		if m := zoneless.FindString(body); m != "" {
			t.Errorf("/%s has a time without its zone: %q", path, m)
		}
		texts := timeText.FindAllStringSubmatch(body, -1)
		if len(texts) < 3 {
			t.Fatalf("/%s shows %d times, want several:\n%s", path, len(texts), body)
		}
		for _, m := range texts {
			if !rfc3339.MatchString(m[1]) {
				t.Errorf("/%s shows the time %q, want RFC 3339 with its zone", path, m[1])
			}
		}
		if path == "schedules/nightly" && !strings.Contains(body, "+01:00</time> <span class=\"muted\">CET</span>") {
			t.Errorf("nightly's times are not in Berlin's offset with its abbreviation:\n%s", body)
		}
	}
}
