package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/belfry/belfry/examples/service/jobs"
	"github.com/belfry/belfry/runtime"
)

// binDir holds the service binary built once for all tests.
var binDir string

func TestMain(m *testing.M) {
	// Parsed here, before the directory exists: a bad flag exits the
	// binary, and would otherwise leave the directory behind.
	flag.Parse()
	dir, err := os.MkdirTemp("", "belfry-service-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

var (
	buildOnce sync.Once
	buildErr  error
)

// serviceBinary builds the example service: the tests run it as a
// deployment would, as separate processes sharing only Redis.
func serviceBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(binDir, "service")
	buildOnce.Do(func() {
		out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return bin
}

// startRedis starts a redis-server of the test's own on a unix socket and
// returns its URL. A missing redis-server fails the test: it never skips.
func startRedis(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server not on PATH: %v (install it: apt-get install redis-server)", err)
	}
	dir := t.TempDir()
	socket := filepath.Join(dir, "redis.sock")
	cmd := exec.Command(bin, "--port", "0", "--unixsocket", socket, "--dir", dir,
		"--save", "", "--appendonly", "no", "--logfile", filepath.Join(dir, "redis.log"))
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting redis-server: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	})
	waitFor(t, 10*time.Second, "redis-server to accept connections", func() bool {
		c, err := net.Dial("unix", socket)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return "unix://" + socket
}

// replica is one running service process.
type replica struct {
	name  string
	cmd   *exec.Cmd
	base  string // http://127.0.0.1:port/cron/
	log   *syncBuffer
	done  chan struct{}
	state *os.ProcessState
}

// exampleNamespace is the namespace the service derives from its jobs
// package when -namespace is not given.
func exampleNamespace() string {
	return runtime.DefaultNamespace(jobs.NewRegistry(&jobs.Jobs{DB: jobs.NewDB()}))
}

var servingRE = regexp.MustCompile(`msg=serving .*admin=(\S+)`)

// startReplica runs the service on a port the kernel picks and waits until
// it logs its admin URL. The process is stopped when the test ends, and its
// log is printed if the test failed.
func startReplica(t *testing.T, redisURL, name string, args ...string) *replica {
	t.Helper()
	bin := serviceBinary(t)
	r := &replica{name: name, log: &syncBuffer{}, done: make(chan struct{})}
	r.cmd = exec.Command(bin, append([]string{"-redis", redisURL, "-http", "127.0.0.1:0", "-replica", name}, args...)...)
	stderr, err := r.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	serving := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			r.log.WriteString(line + "\n")
			if m := servingRE.FindStringSubmatch(line); m != nil {
				select {
				case serving <- m[1]:
				default:
				}
			}
		}
		io.Copy(io.Discard, stderr)
		r.cmd.Wait() // after the last read, as exec.Cmd.StderrPipe requires
		r.state = r.cmd.ProcessState
		close(r.done)
	}()
	t.Cleanup(func() {
		r.stop(t, os.Interrupt)
		if t.Failed() {
			t.Logf("log of %s:\n%s", name, r.log.String())
		}
	})
	select {
	case r.base = <-serving:
	case <-r.done:
		t.Fatalf("%s exited before serving: %v\n%s", name, r.state, r.log.String())
	case <-time.After(20 * time.Second):
		t.Fatalf("%s did not log its admin URL within 20s:\n%s", name, r.log.String())
	}
	return r
}

// stop signals the replica and waits for it to exit, killing it if it
// does not within 15s. It returns the exit state.
func (r *replica) stop(t *testing.T, sig os.Signal) *os.ProcessState {
	t.Helper()
	select {
	case <-r.done:
		return r.state
	default:
	}
	r.cmd.Process.Signal(sig)
	select {
	case <-r.done:
	case <-time.After(15 * time.Second):
		t.Errorf("%s did not exit within 15s of %v; killing it", r.name, sig)
		r.cmd.Process.Kill()
		<-r.done
	}
	return r.state
}

// getJSON fetches path (relative to the admin prefix) and decodes it.
func (r *replica) getJSON(t *testing.T, path string, v any) error {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(r.base + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("GET %s: %s\n%s", path, resp.Status, b)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

type apiStatus struct {
	Leader   *string  `json:"leader"`
	Replicas []string `json:"replicas"`
	Replica  string   `json:"replica"`
	Redis    string   `json:"redis"`
}

type apiRecord struct {
	ID      string    `json:"task_id"`
	Slot    time.Time `json:"slot"`
	Manual  bool      `json:"manual"`
	Outcome string    `json:"outcome"`
	Replica string    `json:"replica"`
	Error   string    `json:"error"`
}

type apiSchedule struct {
	Name     string      `json:"name"`
	Status   string      `json:"status"`
	History  []apiRecord `json:"history"`
	Counters struct {
		Enqueued  int64 `json:"enqueued"`
		Succeeded int64 `json:"succeeded"`
		Failed    int64 `json:"failed"`
		Missed    int64 `json:"missed"`
		Skipped   int64 `json:"skipped"`
	} `json:"counters"`
}

func (r *replica) status(t *testing.T) (apiStatus, error) {
	var s apiStatus
	err := r.getJSON(t, "api/status", &s)
	return s, err
}

func (r *replica) schedule(t *testing.T, name string) (apiSchedule, error) {
	var s apiSchedule
	err := r.getJSON(t, "api/schedules/"+name, &s)
	return s, err
}

// waitFor polls cond until it holds or the deadline passes. The polling
// interval only bounds how soon a change is seen, never what is asserted.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		case <-tick.C:
		}
	}
}

// syncBuffer is a log written by one goroutine and read by the test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) WriteString(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.WriteString(s)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// lines returns the log lines whose message is msg.
func (b *syncBuffer) lines(msg string) []string {
	var out []string
	for line := range strings.Lines(b.String()) {
		if strings.Contains(line, " msg="+msg+" ") || strings.Contains(line, ` msg="`+msg+`" `) {
			out = append(out, line)
		}
	}
	return out
}
