package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/belfry/belfry/internal/redistest"
	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
	"github.com/belfry/belfry/runtime/admin"
	"github.com/belfry/belfry/runtime/internal/store"
	"github.com/belfry/belfry/runtime/metrics"
	"github.com/redis/go-redis/v9"
)

// listed is one schedule of the paged JSON list.
type listed struct {
	Name     string            `json:"name"`
	Status   runtime.Status    `json:"status"`
	Counters *json.RawMessage  `json:"counters"`
	Missing  []runtime.Missing `json:"missing"`
}

type listPage struct {
	Schedules  []listed               `json:"schedules"`
	NextCursor *string                `json:"next_cursor"`
	Matched    int                    `json:"matched"`
	Counts     map[runtime.Status]int `json:"counts"`
	Missing    []runtime.Missing      `json:"missing"`
}

func getPage(t *testing.T, url string) listPage {
	t.Helper()
	resp, body := do(t, "GET", url, nil, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	var p listPage
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatalf("GET %s: %v\n%s", url, err, body)
	}
	return p
}

// seeded is a registry of n schedules named job-000, job-001, ... whose
// ledger holds what a cluster that ran them leaves: every one seen a month
// ago and last night's slot done, except the ones made failing, late,
// paused and running.
type seeded struct {
	rt    *runtime.Runtime
	names []string
	want  map[string]runtime.Status
}

func seed(t *testing.T, rdb redis.UniversalClient, n int, problems map[int]runtime.Status) seeded {
	t.Helper()
	ctx := context.Background()
	ns := redistest.Uniq("ns")
	keys := store.NewKeys(ns)
	s := seeded{want: map[string]runtime.Status{}}
	var scheds []registry.Schedule
	for i := range n {
		name := fmt.Sprintf("job-%03d", i)
		s.names = append(s.names, name)
		scheds = append(scheds, registry.Schedule{Name: name, Expr: "17 3 * * *",
			Handler: func(context.Context, registry.Occurrence) error { return nil }})
	}
	reg := registry.MustNew(scheds...)
	rt, err := runtime.New(reg, runtime.Options{Redis: rdb, Namespace: ns, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	s.rt = rt
	now := time.Now()
	pipe := rdb.Pipeline()
	for i, name := range s.names {
		sched, _ := reg.Lookup(name)
		success := sched.Prev(now).Add(time.Minute)
		status := problems[i]
		if status == "" {
			status = runtime.StatusOK
		}
		s.want[name] = status
		switch status {
		case runtime.StatusLate:
			success = now.Add(-72 * time.Hour)
		case runtime.StatusFailing:
			pipe.HSet(ctx, keys.Failing(), name, now.UnixMilli())
		case runtime.StatusRunning:
			pipe.HSet(ctx, keys.Active(), name, "running")
		case runtime.StatusPaused:
			pipe.HSet(ctx, keys.Paused, name, `{"reason":"migrating","at":1}`)
		}
		pipe.HSet(ctx, keys.Stats, name+":first_seen", now.Add(-30*24*time.Hour).UnixMilli(),
			name+":last_slot_success", success.UnixMilli(), name+":succeeded", 30)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

// order is the list's order: failing, late, paused, running, ok, by name
// within each.
func (s seeded) order() []string {
	rank := map[runtime.Status]int{runtime.StatusFailing: 0, runtime.StatusLate: 1, runtime.StatusPaused: 2, runtime.StatusRunning: 3, runtime.StatusOK: 4}
	out := slices.Clone(s.names)
	slices.SortStableFunc(out, func(a, b string) int { return rank[s.want[a]] - rank[s.want[b]] })
	return out
}

// The list pages by cursor through every schedule exactly once, problems
// first and by name within each status; q searches names, status filters;
// the counts are of every schedule. Without paging parameters the JSON list
// is the bare array of every schedule it always was.
func TestListPagesSearchesAndPutsProblemsFirst(t *testing.T) {
	t.Parallel()
	s := seed(t, sharedRedis(t), 230, map[int]runtime.Status{
		7: runtime.StatusFailing, 150: runtime.StatusFailing, 3: runtime.StatusLate, 201: runtime.StatusPaused,
		12: runtime.StatusPaused, 99: runtime.StatusRunning, 0: runtime.StatusLate,
	})
	srv := httptest.NewServer(admin.New(s.rt, admin.Options{}))
	t.Cleanup(srv.Close)

	var seen []string
	next := srv.URL + "/api/schedules?limit=50"
	for pages := 0; ; pages++ {
		p := getPage(t, next)
		if p.Matched != 230 || p.Counts[runtime.StatusFailing] != 2 || p.Counts[runtime.StatusLate] != 2 ||
			p.Counts[runtime.StatusPaused] != 2 || p.Counts[runtime.StatusRunning] != 1 || p.Counts[runtime.StatusOK] != 223 {
			t.Fatalf("page %d: matched %d, counts %v", pages, p.Matched, p.Counts)
		}
		for _, sc := range p.Schedules {
			if sc.Status != s.want[sc.Name] {
				t.Errorf("%s is %s, want %s", sc.Name, sc.Status, s.want[sc.Name])
			}
			seen = append(seen, sc.Name)
		}
		if p.NextCursor == nil {
			if len(p.Schedules) != 30 {
				t.Errorf("last page has %d rows, want 30", len(p.Schedules))
			}
			break
		}
		if len(p.Schedules) != 50 {
			t.Fatalf("page %d has %d rows, want 50", pages, len(p.Schedules))
		}
		next = srv.URL + "/api/schedules?limit=50&cursor=" + url.QueryEscape(*p.NextCursor)
	}
	if want := s.order(); !slices.Equal(seen, want) {
		t.Errorf("paged order:\n%v\nwant\n%v", seen[:10], want[:10])
	}

	p := getPage(t, srv.URL+"/api/schedules?q=JOB-01")
	var names []string
	for _, sc := range p.Schedules {
		names = append(names, sc.Name)
	}
	if want := []string{"job-012", "job-010", "job-011", "job-013", "job-014", "job-015", "job-016", "job-017", "job-018", "job-019"}; !slices.Equal(names, want) || p.Matched != 10 {
		t.Errorf("q=JOB-01: %v (matched %d), want %v: any case, the paused one first", names, p.Matched, want)
	}
	p = getPage(t, srv.URL+"/api/schedules?status=late,running")
	names = nil
	for _, sc := range p.Schedules {
		names = append(names, sc.Name)
	}
	if want := []string{"job-000", "job-003", "job-099"}; !slices.Equal(names, want) {
		t.Errorf("status=late,running: %v, want %v", names, want)
	}
	for _, bad := range []string{"limit=0", "limit=5000", "limit=x", "status=broken", "cursor=not-one"} {
		if resp, body := do(t, "GET", srv.URL+"/api/schedules?"+bad, nil, nil); resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, `"error"`) {
			t.Errorf("%s: %d %s, want 400 with a message", bad, resp.StatusCode, body)
		}
	}
	resp, body := do(t, "GET", srv.URL+"/api/schedules", nil, nil)
	var all []listed
	if err := json.Unmarshal([]byte(body), &all); err != nil || resp.StatusCode != 200 || len(all) != 230 {
		t.Errorf("unpaged list: %d, %d schedules, %v; want the bare array of all 230", resp.StatusCode, len(all), err)
	}

	// The page: the same order 100 rows at a time, a next link that works
	// without JavaScript, the search as a GET form.
	rows := regexp.MustCompile(`<tr data-schedule="([^"]+)"`)
	_, html := do(t, "GET", srv.URL+"/", nil, nil)
	var shown []string
	for _, m := range rows.FindAllStringSubmatch(html, -1) {
		shown = append(shown, m[1])
	}
	if want := s.order()[:100]; !slices.Equal(shown, want) {
		t.Errorf("first page rows %v..., want %v...", shown[:min(8, len(shown))], want[:8])
	}
	for _, want := range []string{`<form class="search" method="get" action="./"`, "Showing 1–100 of 230", `rel="next"`,
		`<a class="count failing" href="?status=failing">2 failing</a>`, `<a class="count ok" href="?status=ok">223 ok</a>`} {
		if !strings.Contains(html, want) {
			t.Errorf("first page lacks %q", want)
		}
	}
	link := regexp.MustCompile(`href="(\?[^"]*cursor=[^"]+)" rel="next"`).FindStringSubmatch(html)
	if link == nil {
		t.Fatal("no next link")
	}
	_, html = do(t, "GET", srv.URL+"/"+strings.ReplaceAll(link[1], "&amp;", "&"), nil, nil)
	shown = nil
	for _, m := range rows.FindAllStringSubmatch(html, -1) {
		shown = append(shown, m[1])
	}
	if want := s.order()[100:200]; !slices.Equal(shown, want) || !strings.Contains(html, "Showing 101–200 of 230") {
		t.Errorf("second page rows %v..., want %v...", shown[:min(3, len(shown))], want[:3])
	}
	_, html = do(t, "GET", srv.URL+"/?q=job-01&status=paused", nil, nil)
	if shown := rows.FindAllStringSubmatch(html, -1); len(shown) != 1 || shown[0][1] != "job-012" || !strings.Contains(html, "Showing 1–1 of 1 matching") {
		t.Errorf("search for paused job-01*: %v", shown)
	}
	if resp, _ := do(t, "GET", srv.URL+"/?limit=nope", nil, nil); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a bad page query: %d, want 400", resp.StatusCode)
	}
}

// countingRedis is a client of the shared Redis that counts the commands
// sent through it.
func countingRedis(t *testing.T) (*redis.Client, *atomic.Int64) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: redistest.SharedAddr()})
	t.Cleanup(func() { rdb.Close() })
	return rdb, redistest.CountCommands(rdb)
}

// Each endpoint reads only what it shows: the commands of a schedule's
// page, its JSON, the status, the health check and a page of the list are
// the same whether the registry holds 20 schedules or 1,200.
func TestEndpointsReadOnlyWhatTheyShow(t *testing.T) {
	t.Parallel()
	paths := []string{"/schedules/job-005", "/api/schedules/job-005", "/api/status", "/healthz",
		"/?limit=10", "/?limit=10&q=job-00", "/api/schedules?limit=10"}
	commandsAt := func(n int) map[string]int64 {
		rdb, commands := countingRedis(t)
		s := seed(t, rdb, n, map[int]runtime.Status{1: runtime.StatusFailing, 2: runtime.StatusPaused})
		srv := httptest.NewServer(admin.New(s.rt, admin.Options{}))
		t.Cleanup(srv.Close)
		// The first page starts the search for removed schedules in the
		// background, through the same client: let it end first.
		waitFor(t, 10*time.Second, "the removed schedules to be read", func() bool {
			_, html := do(t, "GET", srv.URL+"/", nil, nil)
			return !strings.Contains(html, "still being looked for")
		})
		out := map[string]int64{}
		for _, path := range paths {
			do(t, "GET", srv.URL+path, nil, nil) // the first reads every schedule's lateness once
			before := commands.Load()
			do(t, "GET", srv.URL+path, nil, nil)
			out[path] = commands.Load() - before
		}
		return out
	}
	small, large := commandsAt(20), commandsAt(1200)
	for _, path := range paths {
		if small[path] != large[path] {
			t.Errorf("GET %s: %d commands at 20 schedules, %d at 1,200; want the same", path, small[path], large[path])
		}
	}
	t.Logf("commands per request: %v", large)
}

// A Redis too slow for the request's budget is shown slow, never down: the
// page says so and what it could not show, the JSON marks each missing
// part and gives no made-up counters, health is unhealthy, and metrics
// leave out the series they could not read instead of reporting zeros.
func TestSlowRedisIsShownSlowNotDown(t *testing.T) {
	t.Parallel()
	proxy := redistest.NewProxy(t, "tcp", redistest.SharedAddr())
	rdb := proxy.Client(t, redis.Options{ReadTimeout: 10 * time.Second, MaxRetries: -1})
	s := seed(t, rdb, 30, map[int]runtime.Status{1: runtime.StatusFailing})
	srv := httptest.NewServer(admin.New(s.rt, admin.Options{Metrics: metrics.Handler(s.rt)}))
	t.Cleanup(srv.Close)
	if p := getPage(t, srv.URL+"/api/schedules?limit=5"); len(p.Missing) != 0 || p.Schedules[0].Status != runtime.StatusFailing {
		t.Fatalf("before the stall: %+v", p)
	}

	proxy.Delay(3 * time.Second)
	t.Cleanup(proxy.Pass)
	_, html := do(t, "GET", srv.URL+"/", nil, nil)
	for _, want := range []string{"Redis: slow", "Redis slow: no answer within", "Not shown:"} {
		if !strings.Contains(html, want) {
			t.Errorf("the page during the stall lacks %q", want)
		}
	}
	for _, absent := range []string{"Redis: down", "unreachable"} {
		if strings.Contains(html, absent) {
			t.Errorf("the page during the stall says %q", absent)
		}
	}
	_, html = do(t, "GET", srv.URL+"/schedules/job-001", nil, nil)
	if !strings.Contains(html, "Redis slow") || !strings.Contains(html, "the history") {
		t.Errorf("the schedule's page during the stall does not say its history is not shown")
	}
	p := getPage(t, srv.URL+"/api/schedules?limit=5")
	if len(p.Missing) == 0 || !strings.HasPrefix(p.Missing[0].Reason, "Redis slow") {
		t.Errorf("the list during the stall marks nothing missing: %+v", p.Missing)
	}
	for _, sc := range p.Schedules {
		if sc.Status != runtime.StatusUnknown || sc.Counters != nil {
			t.Errorf("%s during the stall: status %s, counters set: %v; want unknown and null", sc.Name, sc.Status, sc.Counters != nil)
		}
	}
	resp, body := do(t, "GET", srv.URL+"/healthz", nil, nil)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "Redis slow") || strings.Contains(body, `"redis":"down"`) {
		t.Errorf("health during the stall: %d %s; want 503 saying Redis is slow", resp.StatusCode, body)
	}
	_, scrape := do(t, "GET", srv.URL+"/metrics", nil, nil)
	for _, absent := range []string{"belfry_schedule_late{", "belfry_schedule_failing{", "belfry_schedule_last_success_timestamp_seconds{"} {
		if strings.Contains(scrape, absent) {
			t.Errorf("metrics during the stall report %s… it could not read", absent)
		}
	}
	for _, want := range []string{"belfry_redis_slow 1", "belfry_redis_up 1", `belfry_schedule_next_run_timestamp_seconds{schedule="job-001"}`} {
		if !strings.Contains(scrape, want) {
			t.Errorf("metrics during the stall lack %q", want)
		}
	}

	proxy.Pass()
	waitFor(t, 10*time.Second, "the page to read everything again", func() bool {
		_, html := do(t, "GET", srv.URL+"/", nil, nil)
		return strings.Contains(html, "Redis: up") && !strings.Contains(html, "Not shown:")
	})
}

// A Redis that does not answer at all for longer than a lease TTL (a
// partition) is down, not slow: slow is for one that answered lately.
func TestSilentRedisTurnsFromSlowToDown(t *testing.T) {
	t.Parallel()
	proxy := redistest.NewProxy(t, "tcp", redistest.SharedAddr())
	rdb := proxy.Client(t, redis.Options{ReadTimeout: 10 * time.Second, MaxRetries: -1})
	ns := redistest.Uniq("ns")
	rt, err := runtime.New(registry.MustNew(registry.Schedule{Name: "nightly", Expr: "17 3 * * *",
		Handler: func(context.Context, registry.Occurrence) error { return nil }}),
		runtime.Options{Redis: rdb, Namespace: ns, LeaseTTL: 3 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	srv := httptest.NewServer(admin.New(rt, admin.Options{}))
	t.Cleanup(srv.Close)
	status := func() string {
		_, body := do(t, "GET", srv.URL+"/api/status", nil, nil)
		var s struct {
			Redis string `json:"redis"`
		}
		json.Unmarshal([]byte(body), &s)
		return s.Redis
	}
	if got := status(); got != "up" {
		t.Fatalf("before the partition: redis %q", got)
	}
	proxy.BlackHole()
	t.Cleanup(proxy.Pass)
	if got := status(); got != "slow" {
		t.Errorf("just after the partition: redis %q, want slow", got)
	}
	waitFor(t, 15*time.Second, "Redis to be down once silent for a lease TTL", func() bool { return status() == "down" })
}
