package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha1"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	goruntime "runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
	"github.com/belfry/belfry/runtime/internal/store"
	"github.com/redis/go-redis/v9"
)

// scaleRow is one size of the scaling run: a replica process's cold
// takeover (every schedule new to Redis), its warm one (a second process
// reading the cursors the first wrote), and its memory.
type scaleRow struct {
	schedules        int
	cold, warm       time.Duration // Run to leader state loaded
	rssKBPerSchedule float64       // process RSS delta, registry and leader state
}

// slowCall is the slowest call Redis logged in a step.
type slowCall struct {
	max     time.Duration // SLOWLOG, every command but EXEC
	command string
	over5ms int
	execMax time.Duration // LATENCY, EXEC and commands alike, 0 if none over its 1 ms threshold
}

// spikeLargeResult is the largest spike: from its slot to the last
// enqueue (each raises its cursor in its transaction) and to the last
// commit of its records.
type spikeLargeResult struct {
	schedules           int
	lastEnqueue, commit time.Duration
	slow                slowCall
}

// zones the scaling registry spreads its schedules over.
var scaleZones = []string{"UTC", "America/New_York", "Europe/London", "Europe/Berlin", "Asia/Tokyo", "Australia/Sydney",
	"America/Los_Angeles", "Asia/Kolkata", "America/Sao_Paulo", "Africa/Johannesburg", "Asia/Singapore", "Pacific/Auckland"}

// zonedRegistry is n daily schedules spread over the day and over zones.
func zonedRegistry(n int, queue string) (*registry.Registry, error) {
	scheds := make([]registry.Schedule, n)
	for i := range scheds {
		scheds[i] = registry.Schedule{Name: fmt.Sprintf("daily-%06d", i), Expr: fmt.Sprintf("%d %d * * *", i%60, (i/60)%24),
			Zone: scaleZones[i%len(scaleZones)], Queue: queue, Handler: func(context.Context, registry.Occurrence) error { return nil }}
	}
	return registry.New(scheds...)
}

// benchScale runs a replica process per size for takeover and memory, then
// the largest spike in this process, with Redis logging every call over
// 1 ms.
func benchScale(addr string, s settings, r *results) error {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	if err := watchSlowCalls(ctx, rdb); err != nil {
		return err
	}
	for _, n := range s.scaleSizes {
		row, err := scaleChild(addr, n)
		if err != nil {
			return fmt.Errorf("%d schedules: %w", n, err)
		}
		r.scale = append(r.scale, row)
	}
	var err error
	if r.takeoverSlow, err = slowCalls(ctx, rdb); err != nil {
		return err
	}
	r.spikeLarge, err = spikeLarge(addr, s.spikeLarge)
	return err
}

// watchSlowCalls makes Redis log every call over 1 ms, from now.
func watchSlowCalls(ctx context.Context, rdb *redis.Client) error {
	for _, kv := range [][2]string{{"slowlog-log-slower-than", "1000"}, {"slowlog-max-len", "10000"}, {"latency-monitor-threshold", "1"}} {
		if err := rdb.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
			return err
		}
	}
	if err := rdb.SlowLogReset(ctx).Err(); err != nil {
		return err
	}
	return rdb.Do(ctx, "LATENCY", "RESET").Err()
}

// slowCalls reads what Redis logged since watchSlowCalls, and starts again.
func slowCalls(ctx context.Context, rdb *redis.Client) (slowCall, error) {
	var out slowCall
	logs, err := rdb.SlowLogGet(ctx, -1).Result()
	if err != nil {
		return out, err
	}
	for _, l := range logs {
		if len(l.Args) > 0 && strings.EqualFold(l.Args[0], "slowlog") {
			continue // the bench's own reset of the log, freeing its entries
		}
		if l.Duration > 5*time.Millisecond {
			out.over5ms++
		}
		if l.Duration > out.max {
			out.max = l.Duration
			out.command = describeCall(l.Args)
		}
	}
	latest, err := rdb.Do(ctx, "LATENCY", "LATEST").Slice()
	if err != nil {
		return out, err
	}
	for _, ev := range latest {
		if f, ok := ev.([]any); ok && len(f) >= 4 {
			if maxMS, ok := f[3].(int64); ok {
				out.execMax = max(out.execMax, time.Duration(maxMS)*time.Millisecond)
			}
		}
	}
	return out, watchSlowCalls(ctx, rdb)
}

// scriptNames are the runtime's scripts by SHA, as the slow log shows them.
var scriptNames = map[string]string{store.CommitScriptHash(): "commit script", store.InitCursorsScriptHash(): "init script"}

// describeCall names a logged call: the command, and a script's first key.
func describeCall(args []string) string {
	if len(args) == 0 {
		return "?"
	}
	desc := strings.ToLower(args[0])
	if (desc == "evalsha" || desc == "eval") && len(args) > 3 {
		if name, ok := scriptNames[args[1]]; ok {
			return name
		}
		if desc == "eval" { // a script's first run, or one sent by body: its start says which
			body := strings.Join(strings.Fields(args[1]), " ")
			return fmt.Sprintf("eval %q", body[:min(len(body), 60)])
		}
		return desc + " " + args[3]
	}
	if len(args) > 1 {
		desc += " " + args[1]
	}
	return desc
}

// scaleChild runs one size in a fresh process, so its RSS is its own.
func scaleChild(addr string, n int) (scaleRow, error) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), replicaEnv+"=scale", "BENCH_REDIS="+addr, "BENCH_N="+strconv.Itoa(n))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return scaleRow{}, fmt.Errorf("scale process: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var row scaleRow
		var coldMS, warmMS float64
		if _, err := fmt.Sscanf(sc.Text(), "SCALE n=%d cold_ms=%f warm_ms=%f rss_kb_per_sched=%f",
			&row.schedules, &coldMS, &warmMS, &row.rssKBPerSchedule); err == nil {
			row.cold, row.warm = time.Duration(coldMS*float64(time.Millisecond)), time.Duration(warmMS*float64(time.Millisecond))
			return row, nil
		}
	}
	return scaleRow{}, fmt.Errorf("scale process printed no SCALE line:\n%s", out)
}

// scaleMain is the scaling run's process: build a zoned registry of
// BENCH_N schedules, take over cold on a fresh namespace and measure RSS
// with the leader state loaded, then take over again, warm, in a second
// runtime of the same process once the first has let go.
func scaleMain() {
	n, _ := strconv.Atoi(os.Getenv("BENCH_N"))
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(1)
	}
	profile := os.Getenv("BENCH_HEAPPROFILE") // a heap profile of the settled leader, by owner
	if profile != "" {
		goruntime.MemProfileRate = 1
	}
	before := settledRSSKB()
	reg, err := zonedRegistry(n, "bench-scale")
	if err != nil {
		fail(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("BENCH_REDIS")})
	defer rdb.Close()
	ns := fmt.Sprintf("bench-scale-%d", n)
	takeover := func(replica string, measure func()) time.Duration {
		ready := make(chan struct{}, 1)
		log := slog.New(&readyHandler{ready: ready})
		rt, err := runtime.New(reg, runtime.Options{Redis: rdb, Namespace: ns, Replica: replica, Logger: log})
		if err != nil {
			fail(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		start := time.Now()
		go func() { rt.Run(ctx); close(done) }()
		select {
		case <-ready:
		case <-time.After(2 * time.Minute):
			fail(errors.New("no leader state within 2 minutes"))
		}
		took := time.Since(start)
		if measure != nil {
			measure()
		}
		cancel()
		<-done
		rt.Close()
		return took
	}
	var rss int64
	cold := takeover("cold", func() {
		rss = settledRSSKB() - before
		if profile != "" {
			if err := writeHeapProfile(profile); err != nil {
				fail(err)
			}
		}
	})
	warm := takeover("warm", nil)
	fmt.Printf("SCALE n=%d cold_ms=%.1f warm_ms=%.1f rss_kb_per_sched=%.3f\n", n, msf(cold), msf(warm), float64(rss)/float64(n))
}

// writeHeapProfile writes the live heap to path, for go tool pprof.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.WriteHeapProfile(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// readyHandler signals the runtime's "scheduling" log line: its leader
// state is loaded. Everything else it drops.
type readyHandler struct{ ready chan struct{} }

func (h *readyHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *readyHandler) Handle(_ context.Context, rec slog.Record) error {
	if rec.Message == "scheduling" {
		select {
		case h.ready <- struct{}{}:
		default:
		}
	}
	return nil
}
func (h *readyHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *readyHandler) WithGroup(string) slog.Handler      { return h }

// settledRSSKB is the process's resident set after a GC that returns
// freed memory to the OS, from /proc/self/status.
func settledRSSKB() int64 {
	goruntime.GC()
	debug.FreeOSMemory()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb
		}
	}
	return 0
}

// spikeLarge makes n schedules come due in the same second, and times the
// last enqueue (whose transaction raises its cursor) and the last commit
// of the slot's records, with Redis logging its slow calls meanwhile.
func spikeLarge(addr string, n int) (spikeLargeResult, error) {
	res := spikeLargeResult{schedules: n}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := fmt.Sprintf("bench-spike-large-%d", n)
	lead := 5*time.Second + time.Duration(n/10000)*time.Second // the registry and the cold takeover come first
	due := time.Now().Add(lead).Truncate(time.Second).UTC()
	reg, err := spikeRegistry(ns, ns, n, due)
	if err != nil {
		return res, err
	}
	var count, lastEnqueue atomic.Int64
	commits := &commitHook{}
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 32})
	defer rdb.Close()
	rdb.AddHook(newEnqueueHook(ns, func(e enqueueEvent) {
		count.Add(1)
		lastEnqueue.Store(e.at.UnixNano())
	}))
	rdb.AddHook(commits)
	rt, err := runtime.New(reg, runtime.Options{Redis: rdb, Namespace: ns, Logger: quietLogger()})
	if err != nil {
		return res, err
	}
	done := make(chan struct{})
	go func() { rt.Run(ctx); close(done) }()
	defer func() { cancel(); <-done; rt.Close() }()
	time.Sleep(time.Until(due.Add(-time.Second)))
	if err := watchSlowCalls(ctx, rdb); err != nil { // the spike's calls only
		return res, err
	}
	watch := watchCost(ctx, rdb, fmt.Sprintf("spike%d", n))
	// Until every schedule's step is committed, not only the first commit
	// after the last enqueue: the records of a spike take longer to write
	// than its enqueues.
	for count.Load() < int64(n) || commits.schedules.Load() < int64(n) {
		if time.Now().After(due.Add(60 * time.Second)) {
			return res, fmt.Errorf("only %d of %d enqueued and %d committed 60s after the slot", count.Load(), n, commits.schedules.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	watch.done(ctx)
	res.lastEnqueue = time.Unix(0, lastEnqueue.Load()).Sub(due)
	res.commit = time.Unix(0, commits.last.Load()).Sub(due)
	if res.slow, err = slowCalls(ctx, rdb); err != nil {
		return res, err
	}
	if size, err := rdb.LLen(ctx, "asynq:{"+ns+"}:pending").Result(); err != nil || size != int64(n) {
		return res, fmt.Errorf("queue holds %d tasks (%v), want %d", size, err, n)
	}
	return res, dropKeys(ctx, rdb, "asynq:{"+ns+"}:*")
}

// dropKeys unlinks the keys matching pattern a thousand at a time: asynq's
// DeleteQueue does it in one script, which at 100,000 tasks runs past
// Redis's script time limit and answers BUSY to everyone meanwhile.
func dropKeys(ctx context.Context, rdb *redis.Client, pattern string) error {
	iter := rdb.Scan(ctx, 0, pattern, 1000).Iterator()
	var keys []string
	flush := func() error {
		if len(keys) == 0 {
			return nil
		}
		err := rdb.Unlink(ctx, keys...).Err()
		keys = keys[:0]
		return err
	}
	for iter.Next(ctx) {
		if keys = append(keys, iter.Val()); len(keys) == 1000 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := iter.Err(); err != nil {
		return err
	}
	return flush()
}

// commitHook notes when a fenced commit script last returned, and counts
// the schedules the commits carried (each a JSON object with a "name").
type commitHook struct{ last, schedules atomic.Int64 }

func (h *commitHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *commitHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			h.note(cmd)
		}
		return err
	}
}
func (h *commitHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.note(cmd)
		return err
	}
}

func (h *commitHook) note(cmd redis.Cmder) {
	args := cmd.Args()
	if cmd.Err() != nil || len(args) < 2 {
		return
	}
	switch body, _ := args[1].(string); {
	case args[0] == "evalsha" && body == store.CommitScriptHash():
	case args[0] == "eval" && fmt.Sprintf("%x", sha1.Sum([]byte(body))) == store.CommitScriptHash():
		// The script's first run, after Redis answered NOSCRIPT.
	default:
		return
	}
	if c, ok := cmd.(*redis.Cmd); !ok {
		return
	} else if n, err := c.Int(); err != nil || n != 1 {
		return // refused: not committed
	}
	var batch []byte
	switch b := args[len(args)-1].(type) {
	case []byte:
		batch = b
	case string:
		batch = []byte(b)
	}
	h.schedules.Add(int64(bytes.Count(batch, []byte(`"name":`))))
	h.last.Store(time.Now().UnixNano())
}

func (c slowCall) String() string {
	return fmt.Sprintf("%.1f ms (%s), %d over 5 ms; EXEC or any: %.0f ms", msf(c.max), c.command, c.over5ms, msf(c.execMax))
}
