package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// adoptJobs is the service's jobs package as the README's "Add belfry to
// your service" writes it: a method handler whose receiver carries a
// DB-like dependency. QUEUE is replaced by a queue of the test's own.
const adoptJobs = `// Package jobs is the service's scheduled work.
package jobs

//go:generate go tool crongen

import (
	"context"
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
	DB  *Store
	Ran chan<- string // tells main that an occurrence ran
}

// Tick records its occurrence once per occurrence key.
//
//cron:schedule "@every 1s" name=adopt:tick queue=QUEUE timeout=1s retry=0
func (j *Jobs) Tick(ctx context.Context, occ registry.Occurrence) error {
	if j.DB.Insert(occ.Key()) {
		select {
		case j.Ran <- occ.Key() + " on " + j.DB.Name:
		default:
		}
	}
	return nil
}
`

// adoptMain is the service's main: runtime.New over the registry, an asynq
// server sharing the Redis client, Run on every replica. It exits after the
// first occurrence has run.
const adoptMain = `package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/belfry/belfry/runtime"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"example.com/svc/jobs"
)

func main() {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("SVC_REDIS")})
	defer rdb.Close()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))

	ran := make(chan string, 1)
	reg := jobs.NewRegistry(&jobs.Jobs{DB: &jobs.Store{Name: "main-db"}, Ran: ran})
	rt, err := runtime.New(reg, runtime.Options{Redis: rdb, Logger: log, Namespace: os.Getenv("SVC_NAMESPACE")})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer rt.Close()

	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{
		Queues: map[string]int{reg.Schedules()[0].Queue: 1},
		Logger: runtime.AsynqLogger(log),
	})
	mux := asynq.NewServeMux()
	rt.RegisterHandlers(mux)
	if err := srv.Start(mux); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rt.Run(ctx) }()
	select {
	case key := <-ran:
		fmt.Println("ran", jobs.TaskTick, key)
	case <-time.After(30 * time.Second):
		fmt.Fprintln(os.Stderr, "no occurrence ran within 30s")
		os.Exit(1)
	}
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	srv.Shutdown()
}
`

// TestAdoptInFreshModule follows the README's "Add belfry to your service"
// in a new module with an empty module cache, as on a CI machine: tool
// dependencies, generate, tidy, generate again (the go run form broke
// here: tidy dropped the generator's dependencies), build, vet, vet with
// cronlint, and a run against Redis in which a method handler with a
// DB-like dependency runs one occurrence.
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
	mod := t.TempDir()
	cache := t.TempDir()
	env := append(os.Environ(),
		"GOMODCACHE="+cache,
		// Writable, so that the temporary cache can be removed.
		"GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -modcacherw"),
		"GOTOOLCHAIN=local", "GOWORK=off",
	)
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
	goCmd("mod", "edit",
		"-require=github.com/belfry/belfry@v0.0.0", "-replace=github.com/belfry/belfry="+root,
		"-tool=github.com/belfry/belfry/cmd/crongen", "-tool=github.com/belfry/belfry/cmd/cronlint")
	queue := "adopt-" + randomHex(t)
	writeFile(t, filepath.Join(mod, "jobs", "jobs.go"), strings.Replace(adoptJobs, "QUEUE", queue, 1))
	writeFile(t, filepath.Join(mod, "main.go"), adoptMain)

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

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	run := exec.CommandContext(ctx, filepath.Join(mod, "svc"))
	run.Env = append(os.Environ(), "SVC_REDIS="+redisAddr, "SVC_NAMESPACE=belfry-adopt-"+queue)
	var stderr strings.Builder
	run.Stderr = &stderr
	out, err := run.Output()
	if err != nil {
		t.Fatalf("running the service: %v\nstdout: %s\nstderr: %s", err, out, stderr.String())
	}
	want := regexp.MustCompile(`^ran adopt:tick cron:adopt:tick:\d+ on main-db\n$`)
	if !want.Match(out) {
		t.Errorf("service printed %q, want a line matching %s\nstderr: %s", out, want, stderr.String())
	}
	cleanupRedis(t, redisAddr, "belfry-adopt-"+queue, queue)
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
