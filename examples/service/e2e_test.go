package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestTwoReplicas runs two replicas of the service on one Redis, as two
// processes, and checks what belfry promises: one leader, every heartbeat
// slot run exactly once, a manual trigger that runs once, and a graceful
// handover when the leader stops.
func TestTwoReplicas(t *testing.T) {
	t.Parallel()
	checkTwoReplicas(t, startRedis(t))
}

// checkTwoReplicas runs the TestTwoReplicas checks against the Redis at
// redisURL, with the replicas' extra flags.
func checkTwoReplicas(t *testing.T, redisURL string, extra ...string) {
	t.Helper()
	// A lease TTL far above the takeover deadline below: a takeover within
	// it proves that the leader handed its lease over instead of letting it
	// expire. Debug logs carry one line per heartbeat execution.
	const leaseTTL = 20 * time.Second
	args := append([]string{"-lease-ttl", leaseTTL.String(), "-log-level", "debug"}, extra...)
	a := startReplica(t, redisURL, "e2e-a", args...)
	b := startReplica(t, redisURL, "e2e-b", args...)
	byName := map[string]*replica{a.name: a, b.name: b}
	// Without -namespace both replicas derive one namespace from the jobs
	// package; either way they say which.
	ns := exampleNamespace()
	if i := slices.Index(extra, "-namespace"); i >= 0 {
		ns = extra[i+1]
	}
	for _, r := range []*replica{a, b} {
		if !strings.Contains(r.log.String(), "namespace="+ns) {
			t.Errorf("%s does not log its namespace %s:\n%s", r.name, ns, r.log.String())
		}
	}

	var leader string
	waitFor(t, 15*time.Second, "both replicas to agree on one leader and list each other", func() bool {
		sa, errA := a.status(t)
		sb, errB := b.status(t)
		if errA != nil || errB != nil || sa.Leader == nil || sb.Leader == nil || *sa.Leader != *sb.Leader {
			return false
		}
		leader = *sa.Leader
		both := func(l []string) bool { return slices.Contains(l, a.name) && slices.Contains(l, b.name) }
		return both(sa.Replicas) && both(sb.Replicas)
	})
	if byName[leader] == nil {
		t.Fatalf("leader %q is neither replica", leader)
	}
	// Each replica's own metrics say whether it schedules: exactly one may.
	var claims []string
	for _, r := range []*replica{a, b} {
		if strings.Contains(r.getText(t, "metrics"), fmt.Sprintf("belfry_leader{replica=%q} 1", r.name)) {
			claims = append(claims, r.name)
		}
	}
	if len(claims) != 1 || claims[0] != leader {
		t.Fatalf("replicas claiming the lease in their metrics: %v, want exactly [%s]", claims, leader)
	}

	// Heartbeats: consecutive seconds, each slot once, each succeeded.
	hb := waitHeartbeats(t, a, 5, time.Time{})
	t.Logf("%d consecutive heartbeats from %s", len(hb), hb[0].Slot.Format(time.TimeOnly))

	// A manual trigger, submitted twice with one key as a double-clicked
	// form would, runs once.
	wantID := "cron:" + ns + "/send-digest:manual:e2e-digest-1"
	for range 2 {
		status, body := post(t, b.base+"api/schedules/send-digest/trigger", http.Header{"Idempotency-Key": {"e2e-digest-1"}})
		if status != http.StatusAccepted || !strings.Contains(body, `"task_id": "`+wantID+`"`) {
			t.Fatalf("trigger: %d %s, want 202 with task_id %s", status, body, wantID)
		}
	}
	var digest apiRecord
	waitFor(t, 15*time.Second, "the triggered digest to succeed", func() bool {
		s, err := a.schedule(t, "send-digest")
		if err != nil {
			return false
		}
		for _, r := range s.History {
			if r.ID == wantID && r.Outcome == "succeeded" {
				digest = r
				return true
			}
		}
		return false
	})
	if !digest.Manual {
		t.Errorf("history record %s is not marked manual", wantID)
	}
	// The digest covers the ISO week before its slot, whenever it runs.
	year, week := digest.Slot.AddDate(0, 0, -7).ISOWeek()
	wantSubject := fmt.Sprintf(`subject="Weekly digest %d-W%02d"`, year, week)
	waitFor(t, 5*time.Second, "the digest's log line", func() bool { return len(sentDigests(a, b, wantID)) > 0 })
	if lines := sentDigests(a, b, wantID); !strings.Contains(lines[0], wantSubject) {
		t.Errorf("digest log %q lacks %s", lines[0], wantSubject)
	}

	// Graceful handover: SIGTERM the leader; the other leads at once.
	old, next := byName[leader], a
	if old == a {
		next = b
	}
	stopped := time.Now()
	if st := old.stop(t, syscall.SIGTERM); !st.Success() {
		t.Errorf("%s exited with %v after SIGTERM, want status 0", old.name, st)
	}
	waitFor(t, 5*time.Second, next.name+" to take over and "+old.name+" to leave the replica list", func() bool {
		s, err := next.status(t)
		return err == nil && s.Leader != nil && *s.Leader == next.name && slices.Equal(s.Replicas, []string{next.name})
	})
	t.Logf("%s took over %s after SIGTERM to %s (lease TTL %s)", next.name, time.Since(stopped).Round(time.Millisecond), old.name, leaseTTL)

	// Heartbeats continue under the new leader, with no gap or repeat
	// across the handover.
	hb = waitHeartbeats(t, next, 3, time.Now().Add(time.Second))
	t.Logf("%d consecutive heartbeats through the handover, up to %s", len(hb), hb[len(hb)-1].Slot.Format(time.TimeOnly))
	final, err := next.schedule(t, "heartbeat")
	if err != nil {
		t.Fatal(err)
	}
	if c := final.Counters; c.Failed+c.Missed+c.Skipped != 0 {
		t.Errorf("heartbeat counters: %d failed, %d missed, %d skipped; want none", c.Failed, c.Missed, c.Skipped)
	}

	// With both processes gone their logs are complete: every execution of
	// a heartbeat or the digest, on either replica, is one line there.
	if st := next.stop(t, os.Interrupt); !st.Success() {
		t.Errorf("%s exited with %v after SIGINT, want status 0", next.name, st)
	}
	runs := map[string]int{}
	for _, r := range []*replica{a, b} {
		for _, line := range r.log.lines("heartbeat") {
			runs[keyRE.FindStringSubmatch(line)[1]]++
		}
	}
	for _, rec := range hb {
		if runs[rec.ID] != 1 {
			t.Errorf("heartbeat %s ran %d times, want once", rec.ID, runs[rec.ID])
		}
	}
	for id, n := range runs {
		if n > 1 {
			t.Errorf("heartbeat %s ran %d times, want once", id, n)
		}
	}
	if n := len(sentDigests(a, b, wantID)); n != 1 {
		t.Errorf("digest %s sent %d times, want once", wantID, n)
	}
}

var keyRE = regexp.MustCompile(` key=(\S+)`)

// sentDigests returns the log lines of digest id sent by either replica.
func sentDigests(a, b *replica, id string) []string {
	var out []string
	for _, r := range []*replica{a, b} {
		for _, line := range r.log.lines("digest sent") {
			if strings.Contains(line, " key="+id) {
				out = append(out, line)
			}
		}
	}
	return out
}

// waitHeartbeats waits until r's heartbeat history holds at least n
// succeeded slots, the newest after since, and checks the whole history on
// the way: scheduled slots are consecutive seconds, none repeated, all
// succeeded up to the newest success. It returns that run, oldest first.
func waitHeartbeats(t *testing.T, r *replica, n int, since time.Time) []apiRecord {
	t.Helper()
	var run []apiRecord
	var bad error
	waitFor(t, 20*time.Second, fmt.Sprintf("%d heartbeats on %s", n, r.name), func() bool {
		s, err := r.schedule(t, "heartbeat")
		if err != nil {
			return false
		}
		var settled bool
		run, settled, bad = consecutive(s.History)
		return bad != nil || (settled && len(run) >= n && run[len(run)-1].Slot.After(since))
	})
	if bad != nil {
		t.Fatal(bad)
	}
	return run
}

// consecutive checks a heartbeat history (newest first, as the API gives
// it) and returns the scheduled occurrences up to the newest success. With
// two workers an older slot may still be running when a newer one has
// succeeded: the run is then not settled yet. A failed, missed or skipped
// slot, or a gap between slots, is an error.
func consecutive(history []apiRecord) (run []apiRecord, settled bool, err error) {
	var recs []apiRecord
	for _, h := range history {
		if !h.Manual {
			recs = append(recs, h)
		}
	}
	slices.SortFunc(recs, func(x, y apiRecord) int { return x.Slot.Compare(y.Slot) })
	for _, h := range recs {
		if h.Outcome != "succeeded" && h.Outcome != "enqueued" && h.Outcome != "running" {
			return nil, false, fmt.Errorf("heartbeat %s: outcome %q %s, want succeeded", h.ID, h.Outcome, h.Error)
		}
	}
	last := -1
	for i, h := range recs {
		if h.Outcome == "succeeded" {
			last = i
		}
	}
	recs = recs[:last+1]
	settled = true
	for i, h := range recs {
		if h.Outcome != "succeeded" {
			settled = false
		}
		if i > 0 {
			if gap := h.Slot.Sub(recs[i-1].Slot); gap != time.Second {
				return nil, false, fmt.Errorf("heartbeat slots %s and %s are %s apart, want 1s (a slot was skipped or repeated)",
					recs[i-1].ID, h.ID, gap)
			}
		}
	}
	return recs, settled, nil
}

func post(t *testing.T, url string, header http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header = header
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (r *replica) getText(t *testing.T, path string) string {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(r.base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// statusOf is the status of GET url.
func statusOf(t *testing.T, url string) int {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestWithoutRedis checks the disabled mode: with no Redis the service
// still serves its admin page, says once why nothing is scheduled, and
// stops cleanly.
func TestWithoutRedis(t *testing.T) {
	t.Parallel()
	r := startReplica(t, "", "no-redis")
	var s apiStatus
	if err := r.getJSON(t, "api/status", &s); err != nil {
		t.Fatal(err)
	}
	if s.Redis != "disabled" || s.Leader != nil {
		t.Errorf("status: redis %q, leader %v; want disabled and no leader", s.Redis, s.Leader)
	}
	page := r.getText(t, "")
	for _, want := range []string{"scheduler disabled", "send-digest", "prune-soft-deleted", "reconcile-payments", "heartbeat"} {
		if !strings.Contains(page, want) {
			t.Errorf("admin page lacks %q", want)
		}
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(strings.TrimSuffix(r.base, "cron/"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusFound || loc != "/cron/" {
		t.Errorf("GET /: %d to %q, want 302 to /cron/", resp.StatusCode, loc)
	}
	// The probes where the README's main.go mounts them: /healthz says
	// what the admin's says, and /livez does not depend on the scheduler.
	root := strings.TrimSuffix(r.base, "cron/")
	for path, want := range map[string]int{"healthz": statusOf(t, r.base+"healthz"), "livez": http.StatusOK} {
		if got := statusOf(t, root+path); got != want {
			t.Errorf("GET /%s: %d, want %d", path, got, want)
		}
	}
	if st := r.stop(t, syscall.SIGTERM); !st.Success() {
		t.Errorf("exit %v after SIGTERM, want 0", st)
	}
	var disabled int
	for line := range strings.Lines(r.log.String()) {
		if strings.Contains(line, "scheduler disabled") {
			disabled++
		}
	}
	if disabled != 1 {
		t.Errorf("%d log lines say the scheduler is disabled, want 1:\n%s", disabled, r.log.String())
	}
}

// TestBadFlags checks that a misconfigured replica fails fast with one
// line saying what is wrong, and never prints a password.
func TestBadFlags(t *testing.T) {
	t.Parallel()
	bin := serviceBinary(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"-bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"-lease-ttl", "soon"}, "-lease-ttl"},
		{[]string{"-lease-ttl", "100ms"}, "LeaseTTL must be at least 1s"},
		{[]string{"-redis", "http://user:hunter2@example.com"}, "invalid URL scheme"},
		{[]string{"-replica", "bad name"}, "Replica"},
		{[]string{"-log-level", "loud"}, "-log-level"},
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"-redis", "redis://127.0.0.1:1", "-postgres", "postgres://user:hunter2@127.0.0.1:1/db"}, "-redis and -postgres"},
		{[]string{"-migrate"}, "give -postgres URL too"},
		{[]string{"-redis-cluster", "127.0.0.1:7000,nohost"}, `-redis-cluster: "nohost": want host:port`},
		{[]string{"-redis-cluster", "127.0.0.1:7000", "-redis", "redis://127.0.0.1:1"}, "-redis and -redis-cluster"},
		{[]string{"-redis-cluster", "127.0.0.1:7000", "-postgres", "postgres://127.0.0.1:1/db"}, "-redis-cluster and -postgres"},
		{[]string{"-postgres", "postgres://user:hunter2@127.0.0.1:1/db?sslmode=sometimes"}, "-postgres postgres://user:xxxxx@127.0.0.1:1/db"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			cmd := exec.Command(bin, append([]string{"-http", "127.0.0.1:0"}, tt.args...)...)
			cmd.Env = append(os.Environ(), "REDIS_URL=")
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 2 {
				t.Fatalf("err %v, want exit status 2; output:\n%s", err, out)
			}
			if lines := strings.Count(string(out), "\n"); lines != 1 {
				t.Errorf("%d lines of output, want 1:\n%s", lines, out)
			}
			if !strings.Contains(string(out), tt.want) {
				t.Errorf("output %q lacks %q", out, tt.want)
			}
			if strings.Contains(string(out), "hunter2") {
				t.Errorf("output shows the password: %q", out)
			}
		})
	}
}
