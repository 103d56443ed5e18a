package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/belfry/belfry/internal/pgtest"
)

// freePorts finds n consecutive free ports on 127.0.0.1, as the demo needs.
// They are taken below the ephemeral ranges (Linux's from 32768, the IANA
// one from 49152), where the kernel never hands a port to an outgoing
// connection: a port checked free there stays free until the demo listens,
// however many connections the tests running beside it open.
func freePorts(t *testing.T, n int) int {
	t.Helper()
	const low, high = 20000, 32768
	for range 50 {
		first := low + rand.IntN(high-low-n)
		ok := true
		for p := first; p < first+n; p++ {
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
			if err != nil {
				ok = false
				break
			}
			l.Close()
		}
		if ok {
			return first
		}
	}
	t.Fatalf("no %d consecutive free ports", n)
	return 0
}

// buildDemo builds the demo; it runs as a process because it handles
// signals and starts processes of its own.
func buildDemo(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "demo")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

var (
	tmpDirRE       = regexp.MustCompile(`demo: removed (\S+)`)
	bannerURLRE    = regexp.MustCompile(`^ .*(http://\S+/cron/)\s+replica demo-\d`)
	bannerPIDRE    = regexp.MustCompile(`replica (demo-\d) \(pid (\d+)\)`)
	bannerHealthRE = regexp.MustCompile(`^  health (http://\S+/healthz)\s`)
)

// TestDemo runs make demo's program the way a newcomer does, on the
// embedded Redis a machine with Go alone gets, and with redis-server: the
// replicas come up and agree on a leader, the banner names each admin URL,
// and Ctrl-C stops everything and removes the demo's files. A busy port is
// one clear line before anything starts.
func TestDemo(t *testing.T) {
	bin := buildDemo(t)
	t.Run("port taken", func(t *testing.T) { portTaken(t, bin) })
	for _, mode := range []string{"embedded", "redis-server"} {
		t.Run(mode, func(t *testing.T) {
			args := []string{"-port", strconv.Itoa(freePorts(t, 3))}
			if mode == "embedded" {
				args = append(args, "-embedded")
			} else if _, err := exec.LookPath("redis-server"); err != nil {
				t.Fatalf("redis-server not on PATH: %v", err)
			}
			runDemo(t, exec.Command(bin, args...), "Redis stopped")
		})
	}
	// On the machine's Postgres, in a database of the test's own.
	t.Run("postgres", func(t *testing.T) {
		database := demoDatabase(t)
		runDemo(t, exec.Command(bin, "-port", strconv.Itoa(freePorts(t, 3)), "-postgres", pgtest.AdminURL(), "-database", database),
			"database "+database+" dropped")
		assertDropped(t, database)
	})
	// make demo as a newcomer runs it: Ctrl-C reaches make too.
	t.Run("make demo", func(t *testing.T) {
		runDemo(t, makeDemo(t, "demo"), "Redis stopped")
	})
	t.Run("make demo postgres", func(t *testing.T) {
		database := demoDatabase(t)
		cmd := makeDemo(t, "demo/postgres")
		cmd.Env = append(cmd.Env, "DEMO_POSTGRES="+pgtest.AdminURL(), "DEMO_DATABASE="+database)
		runDemo(t, cmd, "database "+database+" dropped")
		assertDropped(t, database)
	})
}

// makeDemo is make target, run from the repository's root as a newcomer
// runs it, on free ports.
func makeDemo(t *testing.T, target string) *exec.Cmd {
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatalf("make not on PATH: %v", err)
	}
	cmd := exec.Command("make", "-s", "-C", "../../..", target)
	cmd.Env = append(os.Environ(), "DEMO_PORT="+strconv.Itoa(freePorts(t, 3)))
	return cmd
}

// healthAnswers checks that the banner's health URL is served, as the
// README's main.go serves it: 200 or 503, with the health JSON.
func healthAnswers(t *testing.T, healthURL string) {
	t.Helper()
	if healthURL == "" {
		t.Fatal("the banner names no health URL")
	}
	resp, err := http.Get(healthURL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h struct {
		Status string `json:"status"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil || h.Status == "" ||
		(resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusServiceUnavailable) {
		t.Errorf("GET %s: %d, status %q (%v); want the health JSON", healthURL, resp.StatusCode, h.Status, err)
	}
}

// demoDatabase is a name for the demo's database that no other run uses,
// and a database of that name is dropped when the test ends, should the
// demo leave it behind.
func demoDatabase(t *testing.T) string {
	name := pgtest.Name("belfry_demo_test")
	t.Cleanup(func() {
		if err := pgtest.Drop(context.Background(), name); err != nil {
			t.Error(err)
		}
	})
	return name
}

// assertDropped checks that the demo dropped its database as it stopped.
func assertDropped(t *testing.T, database string) {
	t.Helper()
	if exists, err := pgtest.Exists(context.Background(), database); err != nil || exists {
		t.Errorf("database %s still exists after the demo stopped (%v)", database, err)
	}
}

// runDemo runs the demo as cmd (the binary, or make demo), and stops it
// with Ctrl-C once it is ready; the store's stop says stopped as its last
// step.
func runDemo(t *testing.T, cmd *exec.Cmd, storeStopped string) {
	// Its own process group, so that a demo that hangs can be stopped with
	// the replicas it started, and none outlives the test.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var output strings.Builder
	var banner []string      // admin URLs in the banner
	var health string        // the health URL in the banner
	pids := map[string]int{} // replica -> pid, as the banner says
	ready := make(chan struct{})
	exited := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			mu.Lock()
			output.WriteString(line + "\n")
			if m := bannerURLRE.FindStringSubmatch(line); m != nil {
				banner = append(banner, m[1])
			}
			if m := bannerPIDRE.FindStringSubmatch(line); m != nil {
				pids[m[1]], _ = strconv.Atoi(m[2])
			}
			if m := bannerHealthRE.FindStringSubmatch(line); m != nil {
				health = m[1]
			}
			mu.Unlock()
			if strings.Contains(line, "Press Ctrl-C to stop everything.") {
				close(ready)
			}
		}
		exited <- cmd.Wait()
	}()
	log := func() string { mu.Lock(); defer mu.Unlock(); return output.String() }
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		if t.Failed() {
			t.Logf("demo output:\n%s", log())
		}
	})

	select {
	case <-ready:
	case err := <-exited:
		stopped = true
		t.Fatalf("demo exited before it was ready: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("demo not ready within 60s")
	}
	mu.Lock()
	admins, named, healthURL := slices.Clone(banner), len(pids), health
	mu.Unlock()
	if len(admins) != 3 || named != 3 {
		t.Fatalf("banner lists %d admin URLs %v and %d pids, want 3 of each", len(admins), admins, named)
	}
	healthAnswers(t, healthURL)
	// Replicas started together set up the example's tables without
	// tripping over each other.
	if strings.Contains(log(), "could not create") {
		t.Errorf("a replica could not create the example's tables")
	}
	var leaders []string
	for _, u := range admins {
		resp, err := http.Get(u + "api/status")
		if err != nil {
			t.Fatal(err)
		}
		var s struct {
			Leader   *string  `json:"leader"`
			Replicas []string `json:"replicas"`
		}
		err = json.NewDecoder(resp.Body).Decode(&s)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		if s.Leader == nil {
			t.Fatalf("%s reports no leader", u)
		}
		leaders = append(leaders, *s.Leader)
	}
	if leaders[0] != leaders[1] || leaders[1] != leaders[2] {
		t.Errorf("the replicas disagree about the leader: %v", leaders)
	}
	mu.Lock()
	bannerPIDs := maps.Clone(pids)
	mu.Unlock()
	for _, u := range admins {
		processesNamed(t, u, bannerPIDs)
	}
	familyRuns(t, admins[0])

	// Ctrl-C in a terminal signals the whole foreground process group:
	// the demo and every process it started.
	syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
	select {
	case err := <-exited:
		stopped = true
		if err != nil && cmd.Args[0] != "make" {
			t.Errorf("demo exited with %v after Ctrl-C, want status 0", err)
		}
		// make kills itself with the SIGINT it got, as it should, but says
		// nothing: the demo it ran exited 0.
		if strings.Contains(log(), "make: ***") {
			t.Errorf("make reports an error for a clean stop")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("demo did not stop within 30s of Ctrl-C")
	}
	// The stop is quiet: Redis outlives the replicas' graceful shutdown,
	// so none of them fails to reach it, and none warns about a stop that
	// was asked for.
	_, stopping, _ := strings.Cut(log(), "demo: stopping…")
	for _, line := range strings.Split(stopping, "\n") {
		for _, bad := range []string{"failed to dial", "no such file or directory", "connection refused", "level=ERROR", "level=WARN"} {
			if strings.Contains(line, bad) {
				t.Errorf("the stop after Ctrl-C logged %q:\n%s", bad, line)
			}
		}
	}
	m := tmpDirRE.FindStringSubmatch(log())
	if m == nil {
		t.Fatal("demo did not report removing its directory")
	}
	if _, err := os.Stat(m[1]); !os.IsNotExist(err) {
		t.Errorf("demo directory %s still exists (%v)", m[1], err)
	}
	for _, want := range []string{"replicas stopped", storeStopped} {
		if !strings.Contains(strings.ReplaceAll(log(), "redis-server stopped", "Redis stopped"), want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
}

// portTaken checks the one-line answer when a port is busy.
func portTaken(t *testing.T, bin string) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	out, err := exec.Command(bin, "-port", strconv.Itoa(port)).CombinedOutput()
	want := fmt.Sprintf("demo: 127.0.0.1:%d is taken; pick other ports with -port N or DEMO_PORT=N", port)
	if err == nil || !strings.HasPrefix(string(out), want) || strings.Count(string(out), "\n") != 1 {
		t.Errorf("err %v, output %q; want a failure with one line starting %q", err, out, want)
	}
}

// familyRuns checks that the demo's family is seeded and that its
// per-second member runs, as a visitor of the page sees it.
func familyRuns(t *testing.T, admin string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last string
	for {
		var fam struct {
			Members int64 `json:"members"`
		}
		var member struct {
			LastRun *struct {
				Outcome string `json:"outcome"`
			} `json:"last_run"`
		}
		err := getJSON(admin+"api/schedules/weekly-report", &fam)
		if err == nil {
			err = getJSON(admin+"api/schedules/weekly-report/members/live-demo", &member)
		}
		if err == nil && fam.Members >= 5 && member.LastRun != nil && member.LastRun.Outcome == "succeeded" {
			return
		}
		last = fmt.Sprintf("members %d, live-demo's last run %+v, err %v", fam.Members, member.LastRun, err)
		if time.Now().After(deadline) {
			t.Fatalf("the weekly-report family did not run within 30s: %s", last)
		}
		time.Sleep(200 * time.Millisecond) // polling a separate process: no signal to wait on
	}
}

// processesNamed checks that an admin names the process (pid) of each
// replica as the demo's banner does, once every replica's first heartbeat
// has landed: the page names the process to kill, as the terminal does.
func processesNamed(t *testing.T, admin string, pids map[string]int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var s struct {
			Processes map[string]struct {
				PID int `json:"pid"`
			} `json:"processes"`
		}
		err := getJSON(admin+"api/status", &s)
		wrong := ""
		for name, pid := range pids {
			if got := s.Processes[name].PID; got != pid {
				wrong = fmt.Sprintf("%s names %s's process pid %d; the banner says %d", admin, name, got, pid)
			}
		}
		if err == nil && wrong == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10s: %s (err %v)", wrong, err)
		}
		time.Sleep(100 * time.Millisecond) // polling a separate process: no signal to wait on
	}
}

func getJSON(url string, v any) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}
