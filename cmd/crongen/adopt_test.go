package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// adoptJobs is a jobs package like the README's that runs without a
// database: a method handler whose receiver carries an in-memory store,
// every second. QUEUE is replaced by a queue of the test's own.
const adoptJobs = `// Package jobs is the service's scheduled work.
package jobs

//go:generate go tool crongen

import (
	"context"
	"fmt"
	"sync"

	"github.com/belfry/belfry/registry"
)

// Store stands in for the service's database pool.
type Store struct {
	Name string
	mu   sync.Mutex
	rows map[string]bool
}

// Insert adds key once, as INSERT ... ON CONFLICT DO NOTHING would, and
// reports whether it was new.
func (s *Store) Insert(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rows == nil {
		s.rows = map[string]bool{}
	}
	if s.rows[key] {
		return false
	}
	s.rows[key] = true
	return true
}

// Jobs holds what the handlers need; main passes it to NewRegistry.
type Jobs struct {
	DB *Store
}

// Tick records its occurrence once per occurrence key.
//
//cron:schedule "@every 1s" name=adopt:tick queue=QUEUE timeout=1s retry=0
func (j *Jobs) Tick(ctx context.Context, occ registry.Occurrence) error {
	if j.DB.Insert(occ.Key()) {
		fmt.Printf("ran %s on %s\n", occ.Key(), j.DB.Name)
	}
	return nil
}
`

// adoptMain is the service's main as the README wires it: runtime.New over
// the registry, an asynq server sharing the Redis client, Run on every
// replica until SIGTERM.
const adoptMain = `package main

import (
	"context"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/belfry/belfry/runtime"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"example.com/svc/jobs"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("SVC_REDIS")})
	defer rdb.Close()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))

	reg := jobs.NewRegistry(&jobs.Jobs{DB: &jobs.Store{Name: "main-db"}})
	rt, err := runtime.New(reg, runtime.Options{Redis: rdb, Logger: logger, Namespace: os.Getenv("SVC_NAMESPACE")})
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close()

	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{
		Queues: map[string]int{reg.Schedules()[0].Queue: 1},
		Logger: runtime.AsynqLogger(logger),
	})
	mux := asynq.NewServeMux()
	rt.RegisterHandlers(mux)
	if err := srv.Start(mux); err != nil {
		log.Fatal(err)
	}
	defer srv.Shutdown()

	if err := rt.Run(ctx); err != nil {
		log.Print(err)
	}
}
`

// TestAdoptInFreshModule follows the README's "Add belfry to your service"
// in new modules with an empty module cache, as on a CI machine (see
// adoptModule for the steps): once with the README's own code, which must
// build and be lint clean, and once with a service that runs here, two
// replicas of which run each occurrence of a method handler with a
// DB-like dependency once.
//
// belfry is not published from this checkout, so where the README says
// go get -tool ...@latest the test writes the same go.mod lines with go mod
// edit and a replace directive; everything after that is the README's
// commands verbatim. Modules come through the environment's GOPROXY and
// GOFLAGS, like any build's.
func TestAdoptInFreshModule(t *testing.T) {
	if testing.Short() {
		t.Skip("downloads belfry's dependencies into an empty module cache")
	}
	t.Parallel()
	root := repoRoot(t)
	redisAddr := testRedis(t)
	cache := t.TempDir()
	env := append(os.Environ(),
		"GOMODCACHE="+cache,
		// Writable, so that the temporary cache can be removed.
		"GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -modcacherw"),
		"GOTOOLCHAIN=local", "GOWORK=off",
	)
	queue := "adopt-" + randomHex(t)

	// The README's own code, as a newcomer copies it: it must build and be
	// lint clean (it needs a database to run).
	jobsSrc, mainSrc := readmeCode(t, filepath.Join(root, "README.md"))
	adoptModule(t, env, root, map[string]string{"jobs/jobs.go": jobsSrc, "main.go": mainSrc})

	// A service that can run here: its DB is in memory.
	mod := adoptModule(t, env, root, map[string]string{
		"jobs/jobs.go": strings.Replace(adoptJobs, "QUEUE", queue, 1),
		"main.go":      adoptMain,
	})

	// Two replicas, as two processes: every occurrence runs on one of
	// them, once, whichever holds the lease.
	bin, ns := filepath.Join(mod, "svc"), "belfry-adopt-"+queue
	defer cleanupRedis(t, redisAddr, ns, queue)
	replicas := []*adoptReplica{startAdoptReplica(t, bin, redisAddr, ns), startAdoptReplica(t, bin, redisAddr, ns)}
	runRE := regexp.MustCompile(`^ran (cron:[^/ ]+/adopt:tick:\d+) on main-db$`)
	runs := func() map[string]int {
		n := map[string]int{}
		for _, r := range replicas {
			for _, line := range strings.Split(strings.TrimSpace(r.stdout.String()), "\n") {
				if m := runRE.FindStringSubmatch(line); m != nil {
					n[m[1]]++
				} else if line != "" {
					t.Errorf("replica printed %q, want lines matching %s", line, runRE)
				}
			}
		}
		return n
	}
	deadline := time.After(30 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond) // how soon a run is seen; the deadline decides
	defer tick.Stop()
wait:
	for len(runs()) < 3 && !t.Failed() {
		select {
		case <-deadline:
			break wait
		case <-tick.C:
		}
	}
	for _, r := range replicas {
		if err := r.stop(); err != nil {
			t.Errorf("replica exited with %v after SIGTERM, want status 0\nstderr:\n%s", err, r.stderr.String())
		}
	}
	got := runs()
	if len(got) < 3 {
		t.Fatalf("%d occurrences ran within 30s, want at least 3\nstderr of the first replica:\n%s", len(got), replicas[0].stderr.String())
	}
	t.Logf("%d occurrences ran: %d lines from one replica, %d from the other", len(got),
		strings.Count(replicas[0].stdout.String(), "\n"), strings.Count(replicas[1].stdout.String(), "\n"))
	for key, n := range got {
		if n != 1 {
			t.Errorf("occurrence %s ran %d times across the replicas, want once", key, n)
		}
	}
}

// adoptReplica is one process of the adopting service.
type adoptReplica struct {
	cmd            *exec.Cmd
	stdout, stderr *lockedBuffer
	done           chan error
}

func startAdoptReplica(t *testing.T, bin, redisAddr, namespace string) *adoptReplica {
	t.Helper()
	r := &adoptReplica{cmd: exec.Command(bin), stdout: &lockedBuffer{}, stderr: &lockedBuffer{}, done: make(chan error, 1)}
	r.cmd.Env = append(os.Environ(), "SVC_REDIS="+redisAddr, "SVC_NAMESPACE="+namespace)
	r.cmd.Stdout, r.cmd.Stderr = r.stdout, r.stderr
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.done <- r.cmd.Wait() }()
	t.Cleanup(func() { r.cmd.Process.Kill() })
	return r
}

// stop sends SIGTERM and waits up to 15s for a clean exit.
func (r *adoptReplica) stop() error {
	r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-r.done:
		return err
	case <-time.After(15 * time.Second):
		r.cmd.Process.Kill()
		return fmt.Errorf("no exit within 15s of SIGTERM: %v", <-r.done)
	}
}

// lockedBuffer is an output written by a process and read by the test.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// adoptModule creates module example.com/svc holding files and takes it
// through the README's steps: tool dependencies, tidy, generate, tidy,
// generate again (the go run form failed here: tidy dropped the
// generator's dependencies), build, vet and vet with cronlint. It returns
// the module's directory, with the service built as svc in it.
func adoptModule(t *testing.T, env []string, root string, files map[string]string) string {
	t.Helper()
	mod := t.TempDir()
	goCmd := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir, cmd.Env = mod, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	goCmd("mod", "init", "example.com/svc")
	// Stands for go get github.com/belfry/belfry@latest and go get -tool
	// for both tools: the same go.mod lines, with this checkout.
	goCmd("mod", "edit",
		"-require=github.com/belfry/belfry@v0.0.0", "-replace=github.com/belfry/belfry="+root,
		"-tool=github.com/belfry/belfry/cmd/crongen", "-tool=github.com/belfry/belfry/cmd/cronlint")
	for name, src := range files {
		writeFile(t, filepath.Join(mod, name), src)
	}

	goCmd("mod", "tidy")
	goCmd("generate", "./...")
	generated := filepath.Join(mod, "jobs", outputName)
	first := readFile(t, generated)
	if !strings.Contains(first, "func NewRegistry(jobs *Jobs) *registry.Registry") {
		t.Fatalf("generated file lacks NewRegistry(jobs *Jobs):\n%s", first)
	}
	goCmd("mod", "tidy")
	goCmd("generate", "./...") // after tidy: the step that used to fail
	if again := readFile(t, generated); again != first {
		t.Errorf("generate after tidy wrote a different file")
	}
	goCmd("build", "-o", filepath.Join(mod, "svc"), ".")
	goCmd("vet", "./...")
	cronlint := strings.TrimSpace(goCmd("tool", "-n", "cronlint"))
	if out := goCmd("vet", "-vettool="+cronlint, "./..."); strings.TrimSpace(out) != "" {
		t.Errorf("go vet -vettool=cronlint reported:\n%s", out)
	}
	return mod
}

// readmeMainHeader is what the README leaves out around its main: the
// package clause and imports.
const readmeMainHeader = `package main

import (
	"context"
	"database/sql"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/belfry/belfry/runtime"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"example.com/svc/jobs"
)

`

// readmeCode returns the jobs package and the main of the README's "Add
// belfry to your service", the main with readmeMainHeader before it.
func readmeCode(t *testing.T, readme string) (jobs, main string) {
	t.Helper()
	text := readFile(t, readme)
	_, section, ok := strings.Cut(text, "## Add belfry to your service\n")
	if !ok {
		t.Fatal(`README.md has no section "## Add belfry to your service"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	for _, block := range strings.Split(section, "```go\n")[1:] {
		code, _, _ := strings.Cut(block, "```")
		switch {
		case strings.HasPrefix(code, "// Package jobs"):
			jobs = code
		case strings.HasPrefix(code, "func main() {"):
			main = readmeMainHeader + code
		}
	}
	if jobs == "" || main == "" {
		t.Fatalf("README.md's adoption section lacks the jobs package or main (found jobs: %v, main: %v)", jobs != "", main != "")
	}
	return jobs, main
}

// testRedis returns the address of the Redis the tests share
// (BELFRY_TEST_REDIS, default 127.0.0.1:6379), failing the test when it
// does not answer: a missing Redis is never a skip.
func testRedis(t *testing.T) string {
	t.Helper()
	addr := cmp.Or(os.Getenv("BELFRY_TEST_REDIS"), "127.0.0.1:6379")
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("redis at %s: %v (the test needs a real redis-server; set BELFRY_TEST_REDIS)", addr, err)
	}
	return addr
}

// cleanupRedis removes the keys a run left under namespace and asynq's
// keys of queue.
func cleanupRedis(t *testing.T, addr, namespace, queue string) {
	t.Helper()
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	for _, pattern := range []string{namespace + ":*", "asynq:{" + queue + "}:*"} {
		keys, err := rdb.Keys(ctx, pattern).Result()
		if err == nil && len(keys) > 0 {
			rdb.Del(ctx, keys...)
		}
	}
	rdb.SRem(ctx, "asynq:queues", queue)
}

func randomHex(t *testing.T) string {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}
