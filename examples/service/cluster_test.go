package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/belfry/belfry/internal/redistest"
)

// The service's replicas on a real Redis Cluster (three masters, a
// replica each) for at least two minutes, through a SIGKILL of the
// leader, a CLUSTER FAILOVER of the master holding the namespace's slot,
// a resharding of the heartbeat queue's slot while its per-second
// schedule enqueues, and a SIGKILL of the namespace's master (its
// replica takes over): every heartbeat slot runs once, counted from the
// handlers' own log lines, and /healthz and api/status tell the truth
// throughout (see healthWatch), settling back to a leader, Redis up and
// 200 after each fault. Long (make test/long).
func TestServiceOnRedisClusterRunsEveryOccurrenceOnce(t *testing.T) {
	if !*longFlag {
		t.Skip("runs for more than two minutes: -long (make test/long)")
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cluster := redistest.StartClusterWithReplicas(t, 3, 1)
	// Until its replicas are in sync a master cannot acknowledge the
	// leader's writes, and the replicas rightly do not lead.
	if err := cluster.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	ns := exampleNamespace()
	// The namespace's keys and the heartbeat queue's, as
	// docs/redis-cluster.md lays them out.
	nsKey, queueKey := "belfry:{"+ns+"}:lease", "asynq:{default}:pending"
	const leaseTTL = 2 * time.Second
	// Debug logs carry one line per heartbeat execution.
	args := []string{"-redis-cluster", strings.Join(cluster.Addrs(), ","), "-lease-ttl", leaseTTL.String(), "-log-level", "debug"}

	watch := newHealthWatch(leaseTTL)
	var procs []*replica // every process started, killed ones too
	start := func(name string) {
		r := startReplica(t, "", name, args...)
		procs = append(procs, r)
		watch.serve(r)
	}
	for _, name := range []string{"c1", "c2", "c3"} {
		start(name)
	}
	// Said however the test ends: what health said and what was logged
	// are the report of the run.
	t.Cleanup(func() {
		for _, line := range watch.transitions() {
			t.Log("health: " + line)
		}
		for _, line := range faultLogs(procs) {
			t.Log("log: " + line)
		}
		for _, f := range watch.falseStates() {
			t.Error("false health: " + f)
		}
	})
	watchCtx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		watch.run(watchCtx, t)
	}()
	defer func() {
		stopWatch()
		<-watched
	}()

	leader := watch.settle(t, "the replicas to elect a leader", procs, time.Now())
	runs, _ := heartbeatRuns(procs)
	first := slices.Min(slices.Collect(maps.Keys(runs)))
	from := first + 1 // the first slot that ran may have come due before every replica served
	t.Logf("cluster %v, namespace %s, leader %s, first heartbeat %s", cluster.Addrs(), ns, leader, time.Unix(first, 0).UTC().Format(time.TimeOnly))

	// stage runs one fault once a few more heartbeats ran and the
	// cluster's replicas are in sync, then waits for the service to
	// settle. do returns what it did, for the log.
	stage := func(name string, do func() string) {
		t.Helper()
		waitSlot(t, procs, time.Now().Add(5*time.Second))
		if err := cluster.WaitSynced(ctx); err != nil {
			t.Fatal(err)
		}
		at := time.Now()
		did := do()
		took := time.Since(at)
		leader = watch.settle(t, "the service after the "+name, procs, at)
		t.Logf("fault %s at %s: %s in %s; %s leads, settled after %s",
			name, watch.since(at), did, took.Round(time.Millisecond), leader, time.Since(at).Round(time.Millisecond))
	}

	// The leader SIGKILLed, and started again as a deployment would
	// replace it, under a new name: health may name the dead one as leader
	// only while its lease lasts.
	stage("SIGKILL of the leader", func() string {
		killed := watch.find(leader)
		watch.kill(leader, time.Now())
		if err := killed.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		<-killed.done
		start("c4")
		return killed.name + " killed, c4 started"
	})

	stage("CLUSTER FAILOVER of the namespace's master", func() string {
		old, promoted, err := cluster.Failover(ctx, nsKey)
		if err != nil {
			t.Fatal(err)
		}
		return old.Addr + " -> " + promoted.Addr
	})

	stage("resharding of the queue's slot", func() string {
		source, _, err := cluster.MasterOf(ctx, queueKey)
		if err != nil {
			t.Fatal(err)
		}
		nsMaster, _, err := cluster.MasterOf(ctx, nsKey)
		if err != nil {
			t.Fatal(err)
		}
		masters, err := cluster.MastersNow(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var target *redistest.Private
		for _, m := range masters {
			if m != source && (target == nil || m != nsMaster) {
				target = m
			}
		}
		// While the slot's keys are on both sides an enqueue's script is
		// refused (TRYAGAIN) and retried: the first batches wait for a
		// slot to come due meanwhile, the rest move at once.
		batches := 0
		if _, err := cluster.MigrateSlotOf(ctx, queueKey, target, func() {
			if batches++; batches <= 3 {
				due := time.Now().Truncate(time.Second).Add(1100 * time.Millisecond)
				waitFor(t, 3*time.Second, "a slot due mid-move", func() bool { return time.Now().After(due) })
			}
		}); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%s -> %s (namespace on %s), %d batches", source.Addr, target.Addr, nsMaster.Addr, batches)
	})

	// Beyond the routine events, the namespace's master lost: SIGKILLed,
	// replaced by its replica after the cluster's node timeout, then back
	// as the new master's replica, so the shard acknowledges writes again.
	stage("SIGKILL of the namespace's master", func() string {
		lost, successor, err := cluster.KillMasterOf(ctx, nsKey)
		if err != nil {
			t.Fatal(err)
		}
		lost.Start()
		return lost.Addr + " replaced by " + successor.Addr
	})

	// At least two minutes of slots, then the newest ones a few seconds
	// to arrive before the count.
	to := max(from+125, time.Now().Unix()+3)
	waitSlot(t, procs, time.Unix(to+3, 0))
	waitFor(t, 30*time.Second, "every slot of the window to run", func() bool {
		runs, _ := heartbeatRuns(procs)
		for slot := from; slot <= to; slot++ {
			if runs[slot] == 0 {
				return false
			}
		}
		return true
	})
	stopWatch()
	<-watched
	for _, r := range procs {
		r.stop(t, syscall.SIGTERM)
	}

	runs, where := heartbeatRuns(procs)
	dups, missed := 0, 0
	for slot := from; slot <= to; slot++ {
		switch n := runs[slot]; {
		case n == 0:
			missed++
			t.Errorf("heartbeat slot %s never ran", time.Unix(slot, 0).UTC().Format(time.TimeOnly))
		case n > 1:
			dups += n - 1
			t.Errorf("heartbeat slot %s ran %d times: %v", time.Unix(slot, 0).UTC().Format(time.TimeOnly), n, where[slot])
		}
	}
	t.Logf("heartbeat: %d occurrences over %ds, %d duplicates, %d missed", to-from+1, to-from+1, dups, missed)
	for _, r := range procs {
		for _, bad := range []string{"configuration error", "CROSSSLOT"} {
			if strings.Contains(r.log.String(), bad) {
				t.Errorf("%s logs %q through routine cluster events:\n%s", r.name, bad, grepLines(r.log.String(), bad))
			}
		}
	}
}

// heartbeatKeyRE is the slot (unix seconds) at the end of a heartbeat's
// occurrence key.
var heartbeatKeyRE = regexp.MustCompile(` key=\S*:(\d+)(?:\s|$)`)

// heartbeatRuns counts the heartbeat executions in the processes' logs,
// by slot, and says which processes ran each.
func heartbeatRuns(procs []*replica) (runs map[int64]int, where map[int64][]string) {
	runs, where = map[int64]int{}, map[int64][]string{}
	for _, r := range procs {
		for _, line := range r.log.lines("heartbeat") {
			m := heartbeatKeyRE.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			slot, _ := strconv.ParseInt(m[1], 10, 64)
			runs[slot]++
			where[slot] = append(where[slot], r.name)
		}
	}
	return runs, where
}

// waitSlot waits until a heartbeat of slot at or after at has run.
func waitSlot(t *testing.T, procs []*replica, at time.Time) {
	t.Helper()
	waitFor(t, time.Until(at)+30*time.Second, "a heartbeat at "+at.UTC().Format(time.TimeOnly), func() bool {
		runs, _ := heartbeatRuns(procs)
		for slot := range runs {
			if slot >= at.Unix() {
				return true
			}
		}
		return false
	})
}

// faultLogs sums up what the processes logged about Redis at warn and
// error, without asynq's own lines: each distinct message and error, how
// often, and when first.
func faultLogs(procs []*replica) []string {
	msgRE := regexp.MustCompile(`level=(WARN|ERROR) msg=("(?:[^"\\]|\\.)*"|\S+)`)
	errRE := regexp.MustCompile(` err=("(?:[^"\\]|\\.)*"|\S+)`)
	count := map[string]int{}
	var order []string
	for _, r := range procs {
		for line := range strings.Lines(r.log.String()) {
			if strings.Contains(line, "component=asynq") {
				continue
			}
			m := msgRE.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			what := m[1] + " " + m[2]
			if e := errRE.FindStringSubmatch(line); e != nil {
				what += " err=" + firstWords(e[1], 12)
			}
			key := r.name + ": " + what
			if count[key] == 0 {
				order = append(order, key)
			}
			count[key]++
		}
	}
	out := make([]string, len(order))
	for i, k := range order {
		out[i] = fmt.Sprintf("%s (x%d)", k, count[k])
	}
	return out
}

func firstWords(s string, n int) string {
	f := strings.Fields(s)
	if len(f) > n {
		f = append(f[:n], "…")
	}
	return strings.Join(f, " ")
}

func grepLines(log, s string) string {
	var b strings.Builder
	for line := range strings.Lines(log) {
		if strings.Contains(line, s) {
			b.WriteString(line)
		}
	}
	return b.String()
}

// healthWatch polls /healthz and api/status of every serving replica and
// keeps each one's changes of verdict and every false state it sees. A
// verdict is false when it contradicts itself (200 and not ok, ok with a
// problem, no leader or Redis not up), calls a routine failover or
// resharding a configuration error, or names as leader a replica killed
// longer ago than its lease could outlive it.
type healthWatch struct {
	leaseTTL time.Duration
	begun    time.Time

	mu      sync.Mutex
	serving map[string]*replica
	killed  map[string]time.Time
	last    map[string]string
	changes []string
	wrong   []string
	seen    map[string]bool
}

func newHealthWatch(leaseTTL time.Duration) *healthWatch {
	return &healthWatch{leaseTTL: leaseTTL, begun: time.Now(), serving: map[string]*replica{},
		killed: map[string]time.Time{}, last: map[string]string{}, seen: map[string]bool{}}
}

func (w *healthWatch) serve(r *replica) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.serving[r.name] = r
}

func (w *healthWatch) find(name string) *replica {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.serving[name]
}

// kill stops watching name, killed at: from then its lease lasts at most
// a TTL.
func (w *healthWatch) kill(name string, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.serving, name)
	w.killed[name] = at
}

func (w *healthWatch) since(at time.Time) string {
	return "+" + at.Sub(w.begun).Round(100*time.Millisecond).String()
}

func (w *healthWatch) replicas() []*replica {
	w.mu.Lock()
	defer w.mu.Unlock()
	var rs []*replica
	for _, r := range w.serving {
		rs = append(rs, r)
	}
	slices.SortFunc(rs, func(a, b *replica) int { return strings.Compare(a.name, b.name) })
	return rs
}

// The polling interval bounds how short a state can be and still be seen,
// not what is asserted.
const healthPoll = 300 * time.Millisecond

func (w *healthWatch) run(ctx context.Context, t *testing.T) {
	tick := time.NewTicker(healthPoll)
	defer tick.Stop()
	for {
		var wg sync.WaitGroup
		for _, r := range w.replicas() {
			wg.Go(func() { w.note(sampleHealth(ctx, r)) })
		}
		wg.Wait()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// healthSample is what one replica's /healthz and api/status said, read
// one after the other.
type healthSample struct {
	at      time.Time
	replica string
	code    int // of /healthz; 0 when it did not answer
	err     string
	health  struct {
		Status   string   `json:"status"`
		Redis    string   `json:"redis"`
		Leader   string   `json:"leader"`
		Problems []string `json:"problems"`
	}
	status struct {
		Leader      *string `json:"leader"`
		Redis       string  `json:"redis"`
		RedisError  string  `json:"redis_error"`
		RedisUnsafe string  `json:"redis_unsafe"`
	}
	statusOK bool
}

func sampleHealth(ctx context.Context, r *replica) healthSample {
	s := healthSample{at: time.Now(), replica: r.name}
	client := &http.Client{Timeout: 5 * time.Second}
	get := func(path string, v any) (int, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.base+path, nil)
		if err != nil {
			return 0, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		return resp.StatusCode, json.NewDecoder(resp.Body).Decode(v)
	}
	code, err := get("healthz", &s.health)
	if err != nil {
		s.err = err.Error()
		return s
	}
	s.code = code
	if code, err := get("api/status", &s.status); err == nil && code == http.StatusOK {
		s.statusOK = true
	}
	return s
}

// verdict is a sample as a line of the transitions.
func (s healthSample) verdict() string {
	if s.code == 0 {
		return "no answer"
	}
	leader := "none"
	if s.health.Leader != "" {
		leader = s.health.Leader
	}
	v := fmt.Sprintf("%d %s redis=%s leader=%s", s.code, s.health.Status, s.health.Redis, leader)
	if len(s.health.Problems) > 0 {
		v += " problems=" + firstWords(strings.Join(s.health.Problems, "; "), 16)
	}
	if s.statusOK && s.status.RedisUnsafe != "" {
		v += " redis_unsafe=" + firstWords(s.status.RedisUnsafe, 12)
	}
	return v
}

// falsehoods are what is untrue in s.
func (w *healthWatch) falsehoods(s healthSample) []string {
	if s.code == 0 {
		return nil // a replica stopping; the settle checks say it serves
	}
	var out []string
	h := s.health
	if (s.code == http.StatusOK) != (h.Status == "ok") {
		out = append(out, fmt.Sprintf("/healthz %d with status %q", s.code, h.Status))
	}
	if h.Status == "ok" && (h.Redis != "up" || h.Leader == "" || len(h.Problems) > 0) {
		out = append(out, fmt.Sprintf("ok with redis %s, leader %q, problems %q", h.Redis, h.Leader, h.Problems))
	}
	texts := append(slices.Clone(h.Problems), s.status.RedisError, s.status.RedisUnsafe)
	for _, text := range texts {
		for _, bad := range []string{"configuration error", "CROSSSLOT"} {
			if strings.Contains(text, bad) {
				out = append(out, fmt.Sprintf("a routine cluster event reported as %q: %s", bad, text))
			}
		}
	}
	leaders := []string{h.Leader}
	if s.statusOK && s.status.Leader != nil {
		leaders = append(leaders, *s.status.Leader)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, l := range leaders {
		// A sample's reads began before s.at; a second covers them.
		if at, ok := w.killed[l]; ok && s.at.Sub(at) > w.leaseTTL+time.Second {
			out = append(out, fmt.Sprintf("leader %s, killed %s before", l, s.at.Sub(at).Round(time.Millisecond)))
		}
	}
	return out
}

func (w *healthWatch) note(s healthSample) {
	wrong := w.falsehoods(s)
	w.mu.Lock()
	defer w.mu.Unlock()
	if v := s.verdict(); v != w.last[s.replica] {
		w.last[s.replica] = v
		w.changes = append(w.changes, fmt.Sprintf("%s %s: %s", w.since(s.at), s.replica, v))
	}
	for _, f := range wrong {
		if key := s.replica + f; !w.seen[key] {
			w.seen[key] = true
			w.wrong = append(w.wrong, fmt.Sprintf("%s %s: %s", w.since(s.at), s.replica, f))
		}
	}
}

func (w *healthWatch) transitions() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.changes)
}

func (w *healthWatch) falseStates() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.wrong)
}

// settle waits until every serving replica says, in /healthz and
// api/status, that one leader (the same for all) holds the lease, Redis is
// up and all is well (200), and a heartbeat due after since has run. It
// returns the leader.
func (w *healthWatch) settle(t *testing.T, what string, procs []*replica, since time.Time) string {
	t.Helper()
	var leader string
	waitFor(t, time.Minute, what, func() bool {
		leader = ""
		for _, r := range w.replicas() {
			s := sampleHealth(context.Background(), r)
			w.note(s)
			if s.code != http.StatusOK || s.health.Status != "ok" || s.health.Redis != "up" || !s.statusOK ||
				s.status.Redis != "up" || s.status.Leader == nil || *s.status.Leader != s.health.Leader {
				return false
			}
			if leader != "" && s.health.Leader != leader {
				return false
			}
			leader = s.health.Leader
		}
		runs, _ := heartbeatRuns(procs)
		for slot := range runs {
			if slot > since.Unix() {
				return leader != ""
			}
		}
		return false
	})
	return leader
}
