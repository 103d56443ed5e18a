package runtime_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// sharedRedisAddr is the Redis the tests share, isolated by namespace and
// queue. It must be reachable: a missing Redis fails the tests, never skips.
func sharedRedisAddr() string {
	if a := os.Getenv("BELFRY_TEST_REDIS"); a != "" {
		return a
	}
	return "127.0.0.1:6379"
}

// sharedRedis returns a client of the shared test Redis, or fails the test.
func sharedRedis(t testing.TB) redis.UniversalClient {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: sharedRedisAddr()})
	t.Cleanup(func() { rdb.Close() })
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("redis at %s: %v (tests need a real redis-server; set BELFRY_TEST_REDIS)", sharedRedisAddr(), err)
	}
	return rdb
}

// privateRedis is a redis-server of the test's own on a unix socket, for
// tests (and the chaos harness) that stop and restart Redis. It keeps an
// AOF with appendfsync always: a clean shutdown loses nothing either way,
// but it keeps a restart honest about acknowledged writes.
type privateRedis struct {
	t      testing.TB
	dir    string
	socket string
	cmd    *exec.Cmd
}

// startPrivateRedis starts one in a temporary directory, stopped when the
// test ends.
func startPrivateRedis(t testing.TB) *privateRedis {
	t.Helper()
	p := newPrivateRedis(t, t.TempDir())
	t.Cleanup(p.stop)
	return p
}

// newPrivateRedis starts one with its files in dir; stopping it is the
// caller's job.
func newPrivateRedis(t testing.TB, dir string) *privateRedis {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("redis-server not on PATH: %v (install it: apt-get install redis-server)", err)
	}
	p := &privateRedis{t: t, dir: dir, socket: filepath.Join(dir, "redis.sock")}
	p.start()
	return p
}

func (p *privateRedis) start() {
	p.t.Helper()
	p.cmd = exec.Command("redis-server", "--port", "0", "--unixsocket", p.socket, "--unixsocketperm", "700",
		"--dir", p.dir, "--save", "", "--appendonly", "yes", "--appendfsync", "always",
		"--logfile", filepath.Join(p.dir, "redis.log"))
	if err := p.cmd.Start(); err != nil {
		p.t.Fatalf("starting redis-server: %v", err)
	}
	waitFor(p.t, 10*time.Second, "redis-server to accept connections on "+p.socket+" (see "+filepath.Join(p.dir, "redis.log")+")", func() bool {
		c, err := net.Dial("unix", p.socket)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

// stop is a clean shutdown: on SIGTERM Redis flushes the AOF and exits.
func (p *privateRedis) stop() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.cmd.Wait()
	p.cmd = nil
}

func (p *privateRedis) client(t testing.TB) redis.UniversalClient {
	rdb := redis.NewClient(&redis.Options{Network: "unix", Addr: p.socket,
		DialTimeout: 200 * time.Millisecond, ReadTimeout: time.Second, WriteTimeout: time.Second, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// uniq returns a name unique to this test run, for namespaces and queues.
func uniq(prefix string) string {
	var b [4]byte
	rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// executions records every handler run by slot, independent of the ledger.
type executions struct {
	mu     sync.Mutex
	bySlot map[string]map[int64]int // schedule -> slot unix -> runs
	manual int
}

func newExecutions() *executions { return &executions{bySlot: map[string]map[int64]int{}} }

func (e *executions) handler(ctx context.Context, occ registry.Occurrence) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if occ.Manual {
		e.manual++
		return nil
	}
	m := e.bySlot[occ.Schedule]
	if m == nil {
		m = map[int64]int{}
		e.bySlot[occ.Schedule] = m
	}
	m[occ.Slot.Unix()]++
	return nil
}

func (e *executions) slots(name string) map[int64]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[int64]int{}
	for k, v := range e.bySlot[name] {
		out[k] = v
	}
	return out
}

// startWorker runs an asynq server for queue until the test ends.
func startWorker(t testing.TB, rdb redis.UniversalClient, queue string, register func(*asynq.ServeMux)) {
	t.Helper()
	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{
		Queues: map[string]int{queue: 1}, Concurrency: 4, TaskCheckInterval: 20 * time.Millisecond,
		ShutdownTimeout: 5 * time.Second, Logger: quietAsynq{}, LogLevel: asynq.FatalLevel,
	})
	mux := asynq.NewServeMux()
	register(mux)
	if err := srv.Start(mux); err != nil {
		t.Fatalf("starting asynq server: %v", err)
	}
	t.Cleanup(srv.Shutdown)
}

type quietAsynq struct{}

func (quietAsynq) Debug(...any) {}
func (quietAsynq) Info(...any)  {}
func (quietAsynq) Warn(...any)  {}
func (quietAsynq) Error(...any) {}
func (quietAsynq) Fatal(args ...any) {
	panic(fmt.Sprint(args...))
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p[:len(p)-1]))
	return len(p), nil
}
