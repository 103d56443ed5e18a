package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/belfry/belfry/internal/redistest"
	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
	"github.com/belfry/belfry/runtime/admin"
	"github.com/belfry/belfry/runtime/metrics"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	sharedRedis = redistest.Shared
	waitFor     = redistest.WaitFor
)

// fixture is one running replica with a worker, as a host runs it.
type fixture struct {
	rt     *runtime.Runtime
	ns     string
	queue  string
	mu     sync.Mutex
	manual int
}

// idPrefix is the start of every occurrence ID of schedule name.
func (f *fixture) idPrefix(name string) string { return "cron:" + f.ns + "/" + name }

func (f *fixture) manualRuns() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.manual
}

func newFixture(t *testing.T, rdb redis.UniversalClient, scheds ...registry.Schedule) *fixture {
	t.Helper()
	f := &fixture{queue: redistest.Uniq("q")}
	for i := range scheds {
		scheds[i].Queue = f.queue
		if scheds[i].Handler == nil {
			scheds[i].Handler = func(_ context.Context, occ registry.Occurrence) error {
				f.mu.Lock()
				defer f.mu.Unlock()
				if occ.Manual {
					f.manual++
				}
				return nil
			}
		}
	}
	f.ns = redistest.Uniq("ns")
	rt, err := runtime.New(registry.MustNew(scheds...), runtime.Options{Redis: rdb, Namespace: f.ns,
		Replica: "r0", LeaseTTL: 2 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	f.rt = rt
	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{Queues: map[string]int{f.queue: 1}, Concurrency: 4,
		TaskCheckInterval: 20 * time.Millisecond, LogLevel: asynq.FatalLevel})
	mux := asynq.NewServeMux()
	rt.RegisterHandlers(mux)
	if err := srv.Start(mux); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { rt.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done; srv.Shutdown(); rt.Close() })
	return f
}

const hostileError = `<script>alert("pwned")</script>`

// adminSetup runs one replica with two schedules, a worker, and the admin
// mounted under /cron/ as a host would, and makes "fails" fail once.
func adminSetup(t *testing.T, opts admin.Options) (*fixture, *httptest.Server) {
	t.Helper()
	rdb := sharedRedis(t)
	c := newFixture(t, rdb,
		registry.Schedule{Name: "nightly", Expr: "17 3 * * *", Zone: "Europe/Berlin"},
		registry.Schedule{Name: "fails", Expr: "0 4 * * *", MaxRetry: 0,
			Handler: func(context.Context, registry.Occurrence) error { return errors.New(hostileError) }})
	waitFor(t, 5*time.Second, "the replica to lead", c.rt.Leadership().Leading)
	if opts.Metrics == nil {
		opts.Metrics = metrics.Handler(c.rt)
	}
	mux := http.NewServeMux()
	mux.Handle("/cron/", http.StripPrefix("/cron", admin.New(c.rt, opts)))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return c, srv
}

func do(t *testing.T, method, url string, header http.Header, body io.Reader) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestAdminRoutes(t *testing.T) {
	t.Parallel()
	c, srv := adminSetup(t, admin.Options{})
	// One failed manual run, so the page has an error string to escape.
	if _, err := c.rt.Trigger(context.Background(), "fails", "setup"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the failure to be recorded", func() bool {
		h, _ := c.rt.History(context.Background(), "fails", 1)
		return len(h) == 1 && h[0].Outcome == runtime.OutcomeFailed
	})
	form := url.Values{"request": {"form-1"}}.Encode()
	formHeader := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
	crossSite := http.Header{"Origin": {"https://evil.example"}, "Sec-Fetch-Site": {"cross-site"}}
	base := srv.URL + "/cron/"
	for _, tt := range []struct {
		name, method, path string
		header             http.Header
		body               string
		status             int
		contentType        string
		contains           []string
		absent             []string
	}{
		{"page", "GET", "", nil, "", 200, "text/html", []string{"nightly", "fails", "Europe/Berlin", "17 3 * * *", "Lease holder", "r0", "failing", "Run now", "&lt;script&gt;"}, []string{hostileError}},
		{"detail", "GET", "schedules/fails", nil, "", 200, "text/html", []string{"History", "failed", "&lt;script&gt;alert", c.idPrefix("fails") + ":manual:setup"}, []string{hostileError}},
		{"detail of unknown", "GET", "schedules/nope", nil, "", 404, "text/html", []string{"No schedule is called nope"}, nil},
		{"form trigger", "POST", "schedules/nightly/trigger", formHeader, form, 303, "", nil, nil},
		{"form trigger of unknown", "POST", "schedules/nope/trigger", formHeader, form, 404, "text/html", []string{"no schedule is called nope"}, nil},
		{"list", "GET", "api/schedules", nil, "", 200, "application/json", []string{`"name": "nightly"`, `"expression": "17 3 * * *"`, `"zone": "Europe/Berlin"`, `"next_run": "`, `"status": "failing"`, `"last_run": {`, `"queue": "`}, nil},
		{"one", "GET", "api/schedules/fails", nil, "", 200, "application/json", []string{`"history": [`, `"outcome": "failed"`, `\u003cscript\u003e`}, nil},
		{"one unknown", "GET", "api/schedules/nope", nil, "", 404, "application/json", []string{`"error": "no schedule is called nope"`}, nil},
		{"trigger", "POST", "api/schedules/nightly/trigger", http.Header{"Idempotency-Key": {"k1"}}, "", 202, "application/json", []string{`"task_id": "` + c.idPrefix("nightly") + `:manual:k1"`}, nil},
		{"trigger unknown", "POST", "api/schedules/nope/trigger", nil, "", 404, "application/json", []string{"no schedule is called nope"}, nil},
		{"trigger by GET", "GET", "api/schedules/nightly/trigger", nil, "", 405, "text/plain", nil, nil},
		{"trigger bad key", "POST", "api/schedules/nightly/trigger", http.Header{"Idempotency-Key": {"a b"}}, "", 400, "application/json", []string{"request key"}, nil},
		{"trigger cross-origin", "POST", "api/schedules/nightly/trigger", crossSite, "", 403, "text/plain", nil, nil},
		{"form trigger cross-origin", "POST", "schedules/nightly/trigger", crossSite, form, 403, "text/plain", nil, nil},
		{"status", "GET", "api/status", nil, "", 200, "application/json", []string{`"leader": "r0"`, `"replicas": [`, `"engine": "redis"`, `"redis": "up"`}, nil},
		{"metrics", "GET", "metrics", nil, "", 200, "text/plain", []string{`belfry_schedule_late{schedule="nightly"} 0`, `belfry_schedule_attempts_total{outcome="failed",schedule="fails"} 1`, `belfry_schedule_occurrences_total{outcome="manual",schedule="fails"} 1`, `belfry_schedule_failing{schedule="fails"} 1`, `belfry_leader{replica="r0"} 1`, "belfry_schedule_next_run_timestamp_seconds", "belfry_redis_up 1"}, nil},
		{"health", "GET", "healthz", nil, "", 503, "application/json", []string{`"status":"unhealthy"`, `"failing":["fails"]`, `"leader":"r0"`}, nil},
		{"livez", "GET", "livez", nil, "", 200, "application/json", []string{`"status":"alive"`}, nil},
		{"pause cross-origin", "POST", "api/schedules/nightly/pause", crossSite, `{"reason":"x"}`, 403, "text/plain", nil, nil},
		{"runs cross-origin", "POST", "api/schedules/nightly/runs", crossSite, `{"slot":"2026-11-29T02:17:00Z"}`, 403, "text/plain", nil, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			body := checkResponse(t, tt.method, base+tt.path, tt.header, tt.body, tt.status, tt.contentType, tt.contains)
			for _, s := range tt.absent {
				if strings.Contains(body, s) {
					t.Errorf("body contains %q unescaped", s)
				}
			}
		})
	}
}

func TestAdminFormTriggerRedirectsUnderThePrefixAndRunsOnce(t *testing.T) {
	t.Parallel()
	c, srv := adminSetup(t, admin.Options{})
	form := url.Values{"request": {"form-twice"}}.Encode()
	header := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
	target := srv.URL + "/cron/schedules/nightly/trigger"
	var locations []string
	for range 2 { // the user double-clicks
		resp, _ := do(t, "POST", target, header, strings.NewReader(form))
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("status %d, want 303", resp.StatusCode)
		}
		locations = append(locations, resp.Header.Get("Location"))
	}
	u, _ := url.Parse(target)
	next, err := u.Parse(locations[0])
	if err != nil {
		t.Fatal(err)
	}
	if next.Path != "/cron/schedules/nightly" || next.Query().Get("triggered") != "ok" {
		t.Errorf("redirect to %s, want /cron/schedules/nightly?triggered=ok", next)
	}
	resp, body := do(t, "GET", next.String(), nil, nil)
	if resp.StatusCode != 200 || !strings.Contains(body, "Triggered") || !strings.Contains(body, c.idPrefix("nightly")+":manual:form-twice") {
		t.Errorf("the page after the trigger does not show it (status %d):\n%s", resp.StatusCode, body)
	}
	insp := asynq.NewInspectorFromRedisClient(sharedRedis(t))
	waitFor(t, 10*time.Second, "the manual run", func() bool {
		return c.manualRuns() == 1
	})
	info, err := insp.GetQueueInfo(c.queue)
	if err != nil {
		t.Fatal(err)
	}
	// Size already counts completed tasks, despite its doc comment.
	if total := info.Pending + info.Active + info.Scheduled + info.Retry + info.Archived + info.Completed; total != 1 {
		t.Errorf("double submit left %d tasks in the queue, want 1", total)
	}
	if _, err := insp.GetTaskInfo(c.queue, c.idPrefix("nightly")+":manual:form-twice"); err != nil {
		t.Errorf("the manual task: %v", err)
	}
}

func TestAdminReadOnlyAndMiddleware(t *testing.T) {
	t.Parallel()
	requireToken := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer letmein" {
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	_, srv := adminSetup(t, admin.Options{ReadOnly: true, Middleware: requireToken})
	auth := http.Header{"Authorization": {"Bearer letmein"}}
	if resp, _ := do(t, "GET", srv.URL+"/cron/", nil, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without the host's auth: status %d, want 401", resp.StatusCode)
	}
	resp, body := do(t, "GET", srv.URL+"/cron/", auth, nil)
	if resp.StatusCode != 200 || strings.Contains(body, "<button") {
		t.Errorf("read-only page: status %d, has a button: %v", resp.StatusCode, strings.Contains(body, "<button"))
	}
	resp, body = do(t, "POST", srv.URL+"/cron/api/schedules/nightly/trigger", auth, nil)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "read-only") {
		t.Errorf("read-only trigger: status %d %s, want 403", resp.StatusCode, body)
	}
}

func TestAdminWithoutRedisShowsSchedulesDisabled(t *testing.T) {
	t.Parallel()
	reg := registry.MustNew(registry.Schedule{Name: "nightly", Expr: "17 3 * * *", Handler: func(context.Context, registry.Occurrence) error { return nil }})
	rt, err := runtime.New(reg, runtime.Options{RedisURL: ""})
	if err != nil {
		t.Fatal(err)
	}
	h := admin.New(rt, admin.Options{})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/api/schedules", nil))
	var list []map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil || rec.Code != 200 {
		t.Fatalf("status %d, %v: %s", rec.Code, err, rec.Body)
	}
	if len(list) != 1 || list[0]["status"] != "disabled" || list[0]["next_run"] == nil {
		t.Errorf("without Redis: %v, want nightly disabled with a next run", list)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), "scheduler disabled") {
		t.Errorf("page without Redis: status %d\n%s", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	post := httptest.NewRequest("POST", "/api/schedules/nightly/trigger", nil)
	post.Host = "localhost" // httptest's example.com may not change state
	h.ServeHTTP(rec, post)
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("trigger without Redis: status %d, want 503", rec.Code)
	}
}

// A schedule removed from the code shows in the admin as orphaned, and can
// be forgotten through the API or the page, except in read-only mode.
func TestAdminListsAndForgetsRemovedSchedules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := sharedRedis(t)
	ns, queue := redistest.Uniq("ns"), redistest.Uniq("q")
	noop := func(context.Context, registry.Occurrence) error { return nil }
	old, err := runtime.New(registry.MustNew(
		registry.Schedule{Name: "gone-a", Expr: "17 3 * * *", Queue: queue, Handler: noop},
		registry.Schedule{Name: "gone-b", Expr: "17 4 * * *", Queue: queue, Handler: noop}),
		runtime.Options{Redis: rdb, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"gone-a", "gone-b"} {
		if _, err := old.Trigger(ctx, name, ""); err != nil {
			t.Fatal(err)
		}
	}
	rt, err := runtime.New(registry.MustNew(registry.Schedule{Name: "nightly", Expr: "17 3 * * *", Queue: queue, Handler: noop}),
		runtime.Options{Redis: rdb, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	readOnly := httptest.NewServer(admin.New(rt, admin.Options{ReadOnly: true}))
	t.Cleanup(readOnly.Close)
	srv := httptest.NewServer(admin.New(rt, admin.Options{}))
	t.Cleanup(srv.Close)

	if _, body := do(t, "GET", srv.URL+"/api/orphans", nil, nil); !strings.Contains(body, `"gone-a"`) || !strings.Contains(body, `"gone-b"`) {
		t.Errorf("api/orphans: %s", body)
	}
	if _, body := do(t, "GET", srv.URL+"/", nil, nil); !strings.Contains(body, "Removed from the code") || !strings.Contains(body, `href="orphans/gone-a/confirm"`) {
		t.Errorf("the page does not offer to forget gone-a:\n%s", body)
	}
	if resp, _ := do(t, "DELETE", readOnly.URL+"/api/orphans/gone-a", nil, nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("read-only forget: status %d, want 403", resp.StatusCode)
	}
	if resp, _ := do(t, "DELETE", srv.URL+"/api/orphans/nightly", nil, nil); resp.StatusCode != http.StatusConflict {
		t.Errorf("forget of a declared schedule: status %d, want 409", resp.StatusCode)
	}
	if resp, body := do(t, "DELETE", srv.URL+"/api/orphans/gone-a", nil, nil); resp.StatusCode != http.StatusNoContent {
		t.Errorf("forget gone-a: status %d %s, want 204", resp.StatusCode, body)
	}
	resp, _ := do(t, "POST", srv.URL+"/orphans/gone-b/forget", nil, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "../../?forgot=ok" {
		t.Errorf("form forget: status %d to %q, want 303 to ../../?forgot=ok", resp.StatusCode, resp.Header.Get("Location"))
	}
	if _, body := do(t, "GET", srv.URL+"/api/orphans", nil, nil); !strings.Contains(body, `"orphans": []`) {
		t.Errorf("after forgetting both: %s", body)
	}
}

// Pause, resume and re-run through the JSON API, with the actor the host
// names, and every refusal with its status.
func TestAdminPauseResumeAndRerun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, srv := adminSetup(t, admin.Options{Actor: func(*http.Request) string { return "alice" }})
	_, readOnly := adminSetup(t, admin.Options{ReadOnly: true})
	base := srv.URL + "/cron/api/schedules/nightly/"
	jsonHeader := http.Header{"Content-Type": {"application/json"}}

	resp, body := do(t, "POST", base+"pause", jsonHeader, strings.NewReader(`{"reason": "migrating the table"}`))
	if resp.StatusCode != 200 {
		t.Fatalf("pause: %d %s", resp.StatusCode, body)
	}
	_, body = do(t, "GET", srv.URL+"/cron/api/schedules/nightly", nil, nil)
	var got struct {
		Status string         `json:"status"`
		Paused *runtime.Pause `json:"paused"`
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	if got.Status != "paused" || got.Paused == nil || got.Paused.Reason != "migrating the table" || got.Paused.Actor != "alice" || got.Paused.At.IsZero() {
		t.Errorf("after pause: status %q, paused %+v", got.Status, got.Paused)
	}
	if resp, body := do(t, "POST", base+"resume", nil, nil); resp.StatusCode != 200 {
		t.Errorf("resume: %d %s", resp.StatusCode, body)
	}
	if _, body := do(t, "GET", srv.URL+"/cron/api/schedules/nightly", nil, nil); !strings.Contains(body, `"paused": null`) {
		t.Errorf("after resume: %s", body)
	}

	s, _ := c.rt.Registry().Lookup("nightly")
	lastNight := s.Prev(time.Now())
	slot := `{"slot": "` + lastNight.UTC().Format(time.RFC3339) + `"}`
	resp, body = do(t, "POST", base+"runs", http.Header{"Idempotency-Key": {"night-1"}}, strings.NewReader(slot))
	if resp.StatusCode != 202 || !strings.Contains(body, `"task_id": "`+c.idPrefix("nightly")+`:rerun:`) {
		t.Fatalf("re-run: %d %s", resp.StatusCode, body)
	}
	if _, again := do(t, "POST", base+"runs", http.Header{"Idempotency-Key": {"night-1"}}, strings.NewReader(slot)); again != body {
		t.Errorf("double submit answered %s, want the first answer %s", again, body)
	}
	waitFor(t, 10*time.Second, "the re-run to be recorded with its actor", func() bool {
		h, _ := c.rt.History(ctx, "nightly", 5)
		return len(h) > 0 && h[0].Actor == "alice" && h[0].Slot.Equal(lastNight)
	})
	for _, tt := range []struct {
		name, body string
		status     int
		contains   string
	}{
		{"not a slot", `{"slot": "` + lastNight.Add(time.Minute).UTC().Format(time.RFC3339) + `"}`, 400, "is not a slot of nightly; the nearest are"},
		{"future", `{"slot": "` + s.Next(time.Now()).UTC().Format(time.RFC3339) + `"}`, 400, "is in the future"},
		{"over the cap", `{"from": "` + lastNight.AddDate(0, 0, -150).UTC().Format(time.RFC3339) + `", "to": "` + lastNight.UTC().Format(time.RFC3339) + `"}`, 400, "more than 100 slots"},
		{"neither", `{}`, 400, "want {"},
		{"both", `{"slot": "2026-11-29T02:17:00Z", "from": "2026-11-29T02:17:00Z", "to": "2026-11-29T02:17:00Z"}`, 400, "want {"},
		{"unknown field", `{"slots": []}`, 400, "unknown field"},
		{"not JSON", `slot=yesterday`, 400, "request body"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := do(t, "POST", base+"runs", jsonHeader, strings.NewReader(tt.body))
			if resp.StatusCode != tt.status || !strings.Contains(body, tt.contains) {
				t.Errorf("status %d %s; want %d containing %q", resp.StatusCode, body, tt.status, tt.contains)
			}
		})
	}
	if resp, _ := do(t, "POST", srv.URL+"/cron/api/schedules/nope/pause", nil, nil); resp.StatusCode != 404 {
		t.Errorf("pause of an unknown schedule: %d, want 404", resp.StatusCode)
	}
	for _, path := range []string{"pause", "resume", "runs"} {
		if resp, _ := do(t, "POST", readOnly.URL+"/cron/api/schedules/nightly/"+path, jsonHeader, strings.NewReader(slot)); resp.StatusCode != 403 {
			t.Errorf("read-only %s: %d, want 403", path, resp.StatusCode)
		}
	}
}

// nextRunJSON serves GET api/schedules/{name} of a registry of s alone,
// without Redis, and returns its next_run and next_run_utc, and s's own
// next slot.
func nextRunJSON(t *testing.T, s registry.Schedule) (nextRun, nextRunUTC string, next time.Time) {
	t.Helper()
	s.Handler = func(context.Context, registry.Occurrence) error { return nil }
	reg := registry.MustNew(s)
	rt, err := runtime.New(reg, runtime.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	admin.New(rt, admin.Options{}).ServeHTTP(rec, httptest.NewRequest("GET", "/api/schedules/"+s.Name, nil))
	var got struct {
		NextRun    string `json:"next_run"`
		NextRunUTC string `json:"next_run_utc"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	declared, _ := reg.Lookup(s.Name)
	return got.NextRun, got.NextRunUTC, declared.Next(time.Now())
}

// next_run is in the schedule's zone with the offset written out: a London
// time in winter must not read as UTC ("Z").
func TestAPINextRunCarriesTheZonesOffset(t *testing.T) {
	t.Parallel()
	got, _, next := nextRunJSON(t, registry.Schedule{Name: "london", Expr: "0 8 * * *", Zone: "Europe/London"})
	if want := next.Format("2006-01-02T15:04:05-07:00"); got != want || strings.HasSuffix(got, "Z") {
		t.Errorf("next_run %q, want %q", got, want)
	}
}

// A UTC schedule's next_run is written as every other time in the JSON
// (records, counters, pauses): RFC 3339 with Z, not "+00:00".
func TestAPITimesInUTCEndInZ(t *testing.T) {
	t.Parallel()
	got, gotUTC, next := nextRunJSON(t, registry.Schedule{Name: "nightly", Expr: "17 3 * * *"})
	if want := next.UTC().Format(time.RFC3339); got != want || gotUTC != want {
		t.Errorf("next_run %q, next_run_utc %q; want both %q", got, gotUTC, want)
	}
}

// The next-runs endpoint writes times as next_run does: Z for a UTC
// schedule, the offset (never Z) for any other zone.
func TestAPINextRunsWriteTimesAsNextRunDoes(t *testing.T) {
	t.Parallel()
	for _, s := range []registry.Schedule{
		{Name: "nightly", Expr: "17 3 * * *"},
		{Name: "london", Expr: "0 8 * * *", Zone: "Europe/London"},
	} {
		nextRun, _, _ := nextRunJSON(t, s)
		s.Handler = func(context.Context, registry.Occurrence) error { return nil }
		rt, err := runtime.New(registry.MustNew(s), runtime.Options{})
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		admin.New(rt, admin.Options{}).ServeHTTP(rec, httptest.NewRequest("GET", "/api/schedules/"+s.Name+"/next?n=1", nil))
		var got struct {
			NextRuns []string `json:"next_runs"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		if len(got.NextRuns) != 1 || got.NextRuns[0] != nextRun {
			t.Errorf("%s: next_runs %q, want [%q] as next_run writes it", s.Name, got.NextRuns, nextRun)
		}
	}
}

// A category:action name must not read as a URL scheme in the page's links
// (html/template would neutralise them to #ZgotmplZ).
func TestPageLinksWorkForCategoryActionNames(t *testing.T) {
	t.Parallel()
	c := newFixture(t, sharedRedis(t), registry.Schedule{Name: "email:send", Expr: "17 3 * * *"})
	waitFor(t, 5*time.Second, "the replica to lead", c.rt.Leadership().Leading)
	s, _ := c.rt.Registry().Lookup("email:send")
	if _, err := c.rt.Rerun(context.Background(), "email:send", s.Prev(time.Now()), ""); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(admin.New(c.rt, admin.Options{}))
	t.Cleanup(srv.Close)
	for _, path := range []string{"/", "/schedules/email:send"} {
		_, body := do(t, "GET", srv.URL+path, nil, nil)
		if strings.Contains(body, "ZgotmplZ") {
			t.Errorf("%s has a neutralised link:\n%s", path, body)
		}
		if !strings.Contains(body, "email:send/confirm?action=run") {
			t.Errorf("%s has no Run now link for email:send", path)
		}
	}
	_, body := do(t, "GET", srv.URL+"/schedules/email:send", nil, nil)
	if !strings.Contains(body, `href="./email:send/confirm?action=rerun`) {
		t.Errorf("the history rows have no Re-run link:\n%s", body)
	}
}

// Without the host's authentication in front, a state-changing request must
// come for an allowed host: a DNS-rebinding page's requests are same-origin
// to the browser but carry the attacker's host name.
func TestAdminRefusesStateChangesForUnknownHosts(t *testing.T) {
	t.Parallel()
	c, _ := adminSetup(t, admin.Options{})
	open := admin.New(c.rt, admin.Options{})
	allowed := admin.New(c.rt, admin.Options{AllowedHosts: []string{"Cron.Internal.Example"}})
	authed := admin.New(c.rt, admin.Options{Middleware: func(h http.Handler) http.Handler { return h }})
	for _, tt := range []struct {
		name   string
		h      http.Handler
		host   string
		method string
		status int
	}{
		{"a rebinding page", open, "evil.example", "POST", 403},
		{"a rebinding page, with its port", open, "evil.example:8080", "POST", 403},
		{"the same machine", open, "127.0.0.1:8080", "POST", 202},
		{"localhost", open, "localhost", "POST", 202},
		{"IPv6 loopback", open, "[::1]:8080", "POST", 202},
		{"an allowed name", allowed, "cron.internal.example", "POST", 202},
		{"an unknown name with AllowedHosts", allowed, "evil.example", "POST", 403},
		{"behind the host's auth", authed, "cron.internal.example", "POST", 202},
		{"reading is not a change", open, "evil.example", "GET", 200},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := "/api/schedules/nightly/trigger"
			if tt.method == "GET" {
				path = "/api/schedules/nightly"
			}
			req := httptest.NewRequest(tt.method, path, nil)
			req.Host = tt.host
			rec := httptest.NewRecorder()
			tt.h.ServeHTTP(rec, req)
			if rec.Code != tt.status {
				t.Errorf("status %d, want %d: %s", rec.Code, tt.status, rec.Body)
			}
		})
	}
}

// Manual runs of one schedule are bounded per minute: a script looping on
// the trigger gets 429 with Retry-After, other schedules are not affected.
func TestAdminLimitsManualRunsPerSchedule(t *testing.T) {
	t.Parallel()
	c, _ := adminSetup(t, admin.Options{})
	h := admin.New(c.rt, admin.Options{ManualRunsPerMinute: 3})
	post := func(name string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("POST", "/api/schedules/"+name+"/trigger", nil)
		req.Host = "127.0.0.1"
		h.ServeHTTP(rec, req)
		return rec
	}
	for i := range 3 {
		if rec := post("nightly"); rec.Code != http.StatusAccepted {
			t.Fatalf("trigger %d: %d %s", i+1, rec.Code, rec.Body)
		}
	}
	rec := post("nightly")
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "20" || !strings.Contains(rec.Body.String(), "at most 3 a minute") {
		t.Errorf("the fourth trigger: %d Retry-After %q %s; want 429 after 20s", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
	if rec := post("fails"); rec.Code != http.StatusAccepted {
		t.Errorf("another schedule's trigger: %d, want 202", rec.Code)
	}
}

// With ReplicaAcks, a write the replicas do not acknowledge is a 503 that
// says so and that repeating is safe, not "Redis unreachable" and not a
// success. The shared Redis has no replicas to acknowledge anything.
func TestAdminSaysWhenReplicasDidNotAcknowledgeAWrite(t *testing.T) {
	t.Parallel()
	reg := registry.MustNew(registry.Schedule{Name: "nightly", Expr: "17 3 * * *", Handler: func(context.Context, registry.Occurrence) error { return nil }})
	rt, err := runtime.New(reg, runtime.Options{Redis: sharedRedis(t), Namespace: redistest.Uniq("ns"),
		ReplicaAcks: 1, ReplicaAckTimeout: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	h := admin.New(rt, admin.Options{})
	for _, tt := range []struct{ path, body string }{
		{"/api/schedules/nightly/pause", `{"reason":"x"}`},
		{"/api/schedules/nightly/trigger", ``},
	} {
		req := httptest.NewRequest("POST", tt.path, strings.NewReader(tt.body))
		req.Host = "localhost"
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "replicas acknowledged") {
			t.Errorf("POST %s unacknowledged: %d %s, want 503 naming the replicas", tt.path, rec.Code, rec.Body)
		}
	}
}
