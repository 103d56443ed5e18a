package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
	"github.com/belfry/belfry/runtime/admin"
	"github.com/belfry/belfry/runtime/internal/store"
	"github.com/belfry/belfry/runtime/metrics"
	"github.com/redis/go-redis/v9"
)

// The admin at 1k, 10k and 100k schedules: a registry of that size on the
// private Redis, its state seeded as a cluster that has run for a while
// (cursors, counters, two history records a schedule, 1% failing, 0.5%
// each paused, running and late), and every admin endpoint timed over
// HTTP, with the commands each sends.

// adminSizes are the registry sizes measured; quick mode stops at 10k.
var adminSizes = []int{1_000, 10_000, 100_000}

// adminEndpoint is one request the bench times.
type adminEndpoint struct {
	name string
	path func(p adminPaths) string
}

// adminPaths are the paths that depend on the seeded registry.
type adminPaths struct {
	detail, cursor, search string
}

var adminEndpoints = []adminEndpoint{
	{"list page", func(adminPaths) string { return "" }},
	{"list page 2", func(p adminPaths) string { return "?cursor=" + url.QueryEscape(p.cursor) }},
	{"list search", func(p adminPaths) string { return "?q=" + url.QueryEscape(p.search) }},
	{"list JSON", func(adminPaths) string { return "api/schedules?limit=100" }},
	{"detail", func(p adminPaths) string { return "schedules/" + url.PathEscape(p.detail) }},
	{"detail JSON", func(p adminPaths) string { return "api/schedules/" + url.PathEscape(p.detail) }},
	{"status", func(adminPaths) string { return "api/status" }},
	{"health", func(adminPaths) string { return "healthz" }},
	{"metrics", func(adminPaths) string { return "metrics" }},
}

// adminTiming is one endpoint at one size.
type adminTiming struct {
	endpoint string
	first    time.Duration // the first request after start-up (no cache)
	median   time.Duration
	max      time.Duration // of the repeated requests, the first excluded
	commands int64         // Redis commands of one request
	bytes    int
}

type adminSize struct {
	schedules int
	timings   []adminTiming
	// fullList is the unpaged JSON list (every schedule), the median of
	// three requests read as they arrive: its cost is every
	// schedule's by definition, so it is shown apart.
	fullList time.Duration
	// warm is the first status read, which Run does at start-up.
	warm time.Duration
	// orphans is the admin's background search for removed schedules.
	orphans time.Duration
	// forget is Forget of one removed schedule: one script in Redis,
	// which must not hold it for long whatever the number of schedules.
	forget time.Duration
	// metricsReads is the slowest of a scrape's reads without its
	// exposition.
	metricsReads time.Duration
	// metricsSeries is how many series one scrape writes.
	metricsSeries int
	// slow is the slowest call Redis logged over all of the above: the
	// requests, the background search and Forget. SLOWLOG times a call by
	// the wall clock, so a call during which Redis's thread waited for a
	// core counts that wait; heaviest is the command whose calls took
	// longest on average (INFO commandstats) over the same window, with
	// that average, which such waits barely move.
	slow          slowCall
	heaviest      string
	heaviestPerOp time.Duration
}

type adminResults struct {
	sizes []adminSize
}

// benchAdmin measures every admin endpoint at each size of adminSizes.
func benchAdmin(addr string, s settings, r *results) error {
	sizes, repeats := adminSizes, 5
	if s.benchtime != "1s" { // quick
		sizes, repeats = adminSizes[:2], 3
	}
	for _, n := range sizes {
		size, err := adminAt(addr, n, repeats)
		if err != nil {
			return fmt.Errorf("%d schedules: %w", n, err)
		}
		r.admin.sizes = append(r.admin.sizes, size)
	}
	return nil
}

func adminAt(addr string, n, repeats int) (adminSize, error) {
	ctx := context.Background()
	size := adminSize{schedules: n}
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 20})
	defer rdb.Close()
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		return size, err
	}
	defer rdb.FlushAll(ctx)
	ns := fmt.Sprintf("admin%d", n)
	now := time.Now()
	noop := func(context.Context, registry.Occurrence) error { return nil }
	scheds := make([]registry.Schedule, n)
	exprs := []string{"*/5 * * * *", "17 3 * * *", "0 * * * *"}
	for i := range scheds {
		zone := "UTC"
		if i%4 == 0 {
			zone = "Europe/Berlin"
		}
		scheds[i] = registry.Schedule{Name: fmt.Sprintf("job-%06d", i), Expr: exprs[i%len(exprs)], Zone: zone, Queue: "default", Handler: noop}
	}
	reg, err := registry.New(scheds...)
	if err != nil {
		return size, err
	}
	if err := seedAdmin(ctx, rdb, ns, reg, now); err != nil {
		return size, fmt.Errorf("seeding: %w", err)
	}
	// One schedule removed from the code, whose state Forget removes.
	removed, _ := registry.New(registry.Schedule{Name: "removed-job", Expr: "0 * * * *", Zone: "UTC", Queue: "default", Handler: noop})
	if err := seedAdmin(ctx, rdb, ns, removed, now); err != nil {
		return size, fmt.Errorf("seeding: %w", err)
	}
	if err := watchSlowCalls(ctx, rdb); err != nil {
		return size, err
	}
	before, err := measureCost(ctx, rdb)
	if err != nil {
		return size, err
	}
	var commands atomic.Int64
	counted := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 20})
	defer counted.Close()
	counted.AddHook(commandCounter{&commands})
	rt, err := runtime.New(reg, runtime.Options{Redis: counted, Namespace: ns, Logger: quietLogger()})
	if err != nil {
		return size, err
	}
	defer rt.Close()
	srv := httptest.NewServer(admin.New(rt, admin.Options{Metrics: metrics.Handler(rt)}))
	defer srv.Close()
	get := func(path string) (time.Duration, int64, []byte, error) {
		before := commands.Load()
		start := time.Now()
		resp, err := http.Get(srv.URL + "/" + path)
		if err != nil {
			return 0, 0, nil, err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		took := time.Since(start)
		if err == nil && resp.StatusCode != http.StatusOK && !(path == "healthz" && resp.StatusCode == http.StatusServiceUnavailable) {
			err = fmt.Errorf("GET %s: %s", path, resp.Status)
		}
		return took, commands.Load() - before, body, err
	}
	// What Run does once at start-up: the one read of every schedule's
	// lateness counters, which later requests need only for the schedules
	// whose late moment has passed.
	start := time.Now()
	if _, err := rt.Monitor().Statuses(ctx); err != nil {
		return size, err
	}
	size.warm = time.Since(start)
	// The first page starts the admin's search for removed schedules,
	// which reads every name in Redis in small steps, in the background;
	// it is timed apart, and the requests are timed once it is done.
	start = time.Now()
	for {
		_, _, body, err := get("")
		if err != nil {
			return size, err
		}
		if !strings.Contains(string(body), "still being looked for") {
			break
		}
		if time.Since(start) > time.Minute {
			return size, fmt.Errorf("the removed schedules were not read within a minute")
		}
		time.Sleep(100 * time.Millisecond)
	}
	size.orphans = time.Since(start)
	paths := adminPaths{detail: reg.Schedules()[n/2].Name, search: fmt.Sprintf("job-%04d", n/200)}
	// The reads of a scrape alone, without its exposition, shown apart
	// from the whole scrape; timed before the first scrape, whose garbage
	// would be counted otherwise.
	var reads []time.Duration
	for range repeats {
		start := time.Now()
		var wg sync.WaitGroup
		wg.Go(func() { rt.Monitor().Statuses(ctx) })
		wg.Go(func() { rt.Monitor().LastTimes(ctx) })
		wg.Go(func() { rt.Monitor().SnapshotOf(ctx, nil, 0) })
		wg.Wait()
		reads = append(reads, time.Since(start))
	}
	slices.Sort(reads)
	size.metricsReads = reads[len(reads)-1]
	for _, ep := range adminEndpoints {
		if ep.name == "list page 2" {
			_, _, body, err := get("api/schedules?limit=100")
			if err != nil {
				return size, err
			}
			var page struct {
				Next *string `json:"next_cursor"`
			}
			if err := json.Unmarshal(body, &page); err != nil || page.Next == nil {
				return size, fmt.Errorf("the first page has no next_cursor (%v)", err)
			}
			paths.cursor = *page.Next
		}
		t := adminTiming{endpoint: ep.name}
		var took []time.Duration
		for i := range repeats + 1 {
			d, cmds, body, err := get(ep.path(paths))
			if err != nil {
				return size, err
			}
			if missing := missingIn(body); missing != "" {
				return size, fmt.Errorf("GET %s (request %d, %s): parts missing: %s", ep.path(paths), i+1, d, missing)
			}
			if i == 0 {
				t.first, t.commands, t.bytes = d, cmds, len(body)
				if ep.name == "metrics" {
					size.metricsSeries = seriesIn(body)
				}
				continue
			}
			took = append(took, d)
		}
		slices.Sort(took)
		t.median, t.max = took[len(took)/2], took[len(took)-1]
		size.timings = append(size.timings, t)
	}
	// The unpaged list is tens of megabytes at 100k: read as a client such
	// as curl reads it, as it arrives, not grown in one buffer by
	// io.ReadAll, whose copying in this process would take the cores the
	// server shares, a cost of the bench's, not of the endpoint's.
	var full []time.Duration
	watch := watchCost(ctx, rdb, fmt.Sprintf("fulllist%d", n))
	for range 3 {
		start := time.Now()
		resp, err := http.Get(srv.URL + "/api/schedules")
		if err != nil {
			return size, err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("GET api/schedules: %s", resp.Status)
		}
		if err != nil {
			return size, err
		}
		full = append(full, time.Since(start))
	}
	watch.done(ctx)
	slices.Sort(full)
	size.fullList = full[1]
	start = time.Now()
	if err := rt.Forget(ctx, "removed-job"); err != nil {
		return size, fmt.Errorf("forget: %w", err)
	}
	size.forget = time.Since(start)
	if left, err := rdb.Exists(ctx, store.KeyPrefix(ns)+"hist:removed-job").Result(); err != nil || left != 0 {
		return size, fmt.Errorf("forget left the removed schedule's history (%d, %v)", left, err)
	}
	if left, err := rdb.HExists(ctx, store.KeyPrefix(ns)+"counters", "removed-job").Result(); err != nil || left {
		return size, fmt.Errorf("forget left the removed schedule's counters (%v, %v)", left, err)
	}
	// The cost window ends before the bench's own reads of what Redis
	// logged.
	after, err := measureCost(ctx, rdb)
	if err != nil {
		return size, err
	}
	size.slow, err = slowCalls(ctx, rdb)
	if err != nil {
		return size, err
	}
	for name, cc := range after.since(before).commands {
		if name == "info" { // the bench's own, measuring the window
			continue
		}
		if perOp := time.Duration(cc.usec) * time.Microsecond / time.Duration(cc.calls); perOp > size.heaviestPerOp {
			size.heaviest, size.heaviestPerOp = name, perOp
		}
	}
	return size, nil
}

// seedAdmin writes what a cluster that ran reg for a while leaves in Redis,
// directly, in pipelined batches: the runtime measured is never started.
func seedAdmin(ctx context.Context, rdb *redis.Client, ns string, reg *registry.Registry, now time.Time) error {
	p := store.KeyPrefix(ns)
	ms := func(t time.Time) int64 { return t.UnixMilli() }
	firstSeen := now.Add(-30 * 24 * time.Hour)
	const batch = 1000
	scheds := reg.Schedules()
	for start := 0; start < len(scheds); start += batch {
		pipe := rdb.Pipeline()
		for i := start; i < min(start+batch, len(scheds)); i++ {
			s := scheds[i]
			last := s.Prev(now)
			before := s.Prev(last.Add(-time.Second))
			success := last
			if i%200 == 4 { // late: no success for three days
				success = now.Add(-72 * time.Hour)
			}
			pipe.HSet(ctx, p+"cursors", s.Name, last.Unix())
			pipe.HSet(ctx, p+"counters", s.Name, store.FormatCounters(map[string]int64{"first_seen": ms(firstSeen),
				"last_slot_success": ms(success), "last_success": ms(success), "last_enqueue": ms(last), "enqueued": 120,
				"succeeded": 118, "failed": 2, "last_failure": ms(now.Add(-48 * time.Hour))}))
			outcome, errText := "succeeded", ""
			switch {
			case i%100 == 1:
				outcome, errText = "failed", "dial tcp 10.0.0.7:5432: connection refused"
				pipe.HSet(ctx, p+"failing", s.Name, ms(last))
			case i%200 == 2:
				pipe.HSet(ctx, p+"paused", s.Name, `{"reason":"migrating the table","actor":"bench","at":`+fmt.Sprint(ms(now.Add(-time.Hour)))+`}`)
			case i%200 == 3:
				outcome = "running"
				pipe.HSet(ctx, p+"active", s.Name, "running")
			}
			for k, slot := range []time.Time{before, last} {
				id := "cron:" + ns + "/" + s.Name + ":" + fmt.Sprint(slot.Unix())
				o, e := "succeeded", ""
				if k == 1 {
					o, e = outcome, errText
				}
				pipe.HSet(ctx, p+"occ:"+id, "id", id, "schedule", s.Name, "slot", slot.Unix(), "manual", "0",
					"outcome", o, "enqueued_at", ms(slot), "started_at", ms(slot)+3, "finished_at", ms(slot)+250,
					"duration_ms", 247, "replica", "web-1", "attempt", 0, "max_retry", 3, "error", e)
				pipe.ZAdd(ctx, p+"hist:"+s.Name, redis.Z{Score: float64(ms(slot)), Member: id})
			}
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return err
		}
	}
	return nil
}

// maxMS is the slowest request of a size, each endpoint's first included,
// the whole scrape (its reads and its exposition) among them: past
// metrics.DefaultPerScheduleLimit schedules the scrape's series are
// bounded, so its encoding no longer grows with the registry.
func (s adminSize) maxMS() float64 {
	worst := s.metricsReads
	for _, t := range s.timings {
		worst = max(worst, t.first, t.max)
	}
	return msf(worst)
}

// seriesIn counts the samples of a Prometheus text exposition.
func seriesIn(body []byte) int {
	n := 0
	for line := range strings.Lines(string(body)) {
		if line != "\n" && !strings.HasPrefix(line, "#") {
			n++
		}
	}
	return n
}

// ms100k is the slowest admin request at 100,000 schedules (or at the
// largest size measured), for the summary line.
func (a adminResults) ms100k() float64 {
	if len(a.sizes) == 0 {
		return 0
	}
	return a.sizes[len(a.sizes)-1].maxMS()
}

func (a adminResults) print(w io.Writer) {
	if len(a.sizes) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	header := []string{"admin endpoint"}
	for _, s := range a.sizes {
		header = append(header, fmt.Sprintf("%dk: median / max / first", s.schedules/1000), "cmds")
	}
	fmt.Fprintln(tw, strings.Join(header, "\t")+"\ttarget")
	for i, ep := range adminEndpoints {
		row := []string{ep.name}
		for _, s := range a.sizes {
			t := s.timings[i]
			row = append(row, fmt.Sprintf("%.1f / %.1f / %.1f ms", msf(t.median), msf(t.max), msf(t.first)), fmt.Sprint(t.commands))
		}
		target := "<= 1 s at 100k"
		if strings.HasPrefix(ep.name, "list page") {
			target = "<= 300 ms at 100k"
		}
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t"+target)
	}
	line := func(label, target string, cell func(adminSize) string) {
		row := []string{label}
		for _, s := range a.sizes {
			row = append(row, cell(s), "")
		}
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t"+target)
	}
	line("unpaged JSON list (every schedule, streamed, median of 3)", "(size of the registry)", func(s adminSize) string { return fmt.Sprintf("%.0f ms", msf(s.fullList)) })
	line("metrics: the scrape's reads alone", "<= 1 s at 100k", func(s adminSize) string { return fmt.Sprintf("%.1f ms (max)", msf(s.metricsReads)) })
	line("first status read (once, at Run)", "", func(s adminSize) string { return fmt.Sprintf("%.0f ms", msf(s.warm)) })
	line("removed-schedule search (background, every 15 min)", "", func(s adminSize) string { return fmt.Sprintf("%.0f ms", msf(s.orphans)) })
	line("forget a removed schedule (one script)", "<= 5 ms at 100k", func(s adminSize) string { return fmt.Sprintf("%.1f ms", msf(s.forget)) })
	line("slowest Redis call of all the above (SLOWLOG)", "<= 5 ms at 100k", func(s adminSize) string {
		if s.slow.command == "" {
			return "none over 1 ms"
		}
		return fmt.Sprintf("%.1f ms (%s), %d over 5 ms", msf(s.slow.max), s.slow.command, s.slow.over5ms)
	})
	line("heaviest command of all the above, mean per call", "", func(s adminSize) string {
		return fmt.Sprintf("%s %.0f µs", s.heaviest, float64(s.heaviestPerOp)/float64(time.Microsecond))
	})
	line("metrics: response size", "", func(s adminSize) string {
		return fmt.Sprintf("%.1f MB", float64(s.timings[len(s.timings)-1].bytes)/1e6)
	})
	line("metrics: series", "", func(s adminSize) string { return fmt.Sprint(s.metricsSeries) })
	fmt.Fprintln(tw)
	tw.Flush()
}

// missingIn finds what a response says it could not read, "" for nothing.
func missingIn(body []byte) string {
	for _, marker := range []string{`"part"`, "Not shown:", "not read:"} {
		if i := strings.Index(string(body), marker); i >= 0 {
			from := max(0, i-200)
			return string(body[from:min(len(body), i+200)])
		}
	}
	return ""
}
