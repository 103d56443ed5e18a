// Package redistest gives the tests their Redis (the runtime's, and the
// example service's, which run it as separate processes): the shared
// server (isolated by namespace and queue) and private servers on a unix
// socket for tests that stop, restart or break Redis, Sentinel topologies
// and Redis Clusters of a test's own, and a TCP Proxy that puts network
// faults (partition, latency, a lost reply) between a client and a
// server. A missing redis-server fails the test; it never
// skips.
package redistest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SharedAddr is the Redis the tests share, isolated by namespace and
// queue. It must be reachable: a missing Redis fails the tests, never skips.
func SharedAddr() string {
	if a := os.Getenv("BELFRY_TEST_REDIS"); a != "" {
		return a
	}
	return "127.0.0.1:6379"
}

// Shared returns a client of the shared test Redis, or fails the test.
func Shared(t testing.TB) redis.UniversalClient {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: SharedAddr()})
	t.Cleanup(func() { rdb.Close() })
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("redis at %s: %v (tests need a real redis-server; set BELFRY_TEST_REDIS)", SharedAddr(), err)
	}
	return rdb
}

// TB is the part of testing.TB the servers a test starts report a failure
// through. A program that is not a test (the bench) starting a Cluster
// gives its own, whose Fatalf turns the failure into an error of its own.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Private is a redis-server of the test's own on a unix socket, for
// tests (and the chaos harness) that stop and restart Redis. It keeps an
// AOF with appendfsync always: a clean shutdown loses nothing either way,
// but it keeps a restart honest about acknowledged writes. DEBUG is
// enabled for local connections, so a test can stall the server (DEBUG
// SLEEP) as a long fork or a slow disk does.
type Private struct {
	t      TB
	Dir    string
	Socket string
	// Addr is "127.0.0.1:<port>" for a server started with
	// StartPrivateTCP, the same across restarts; "" otherwise.
	Addr string
	// config is the file a server of a Sentinel topology starts from, so
	// the role Sentinel gives it (written back with CONFIG REWRITE)
	// survives a restart; "" for a standalone server.
	config string
	cmd    *exec.Cmd
}

// StartPrivate starts one in a temporary directory, stopped when the
// test ends.
func StartPrivate(t testing.TB) *Private {
	t.Helper()
	p := NewPrivate(t, t.TempDir())
	t.Cleanup(p.Stop)
	return p
}

// StartPrivateTCP is StartPrivate with the server also listening on a
// port of 127.0.0.1 (Addr), for what cannot use a unix socket:
// redis-sentinel and replicas address servers by host and port, and a
// Proxy may front either.
func StartPrivateTCP(t testing.TB) *Private {
	t.Helper()
	p := newPrivate(t, t.TempDir(), freePort(t))
	t.Cleanup(p.Stop)
	return p
}

// NewPrivate starts one with its files in dir; stopping it is the
// caller's job.
func NewPrivate(t testing.TB, dir string) *Private {
	t.Helper()
	return newPrivate(t, dir, "")
}

func newPrivate(t testing.TB, dir, addr string) *Private {
	t.Helper()
	needCommands(t, "redis-server")
	p := &Private{t: t, Dir: dir, Socket: filepath.Join(dir, "redis.sock"), Addr: addr}
	p.Start()
	return p
}

// needCommands fails the test when a command it needs is not on PATH: a
// missing Redis fails the tests, never skips them.
func needCommands(t TB, commands ...string) {
	t.Helper()
	for _, c := range commands {
		if _, err := exec.LookPath(c); err != nil {
			t.Fatalf("%s not on PATH: %v (the tests need redis-server, redis-sentinel and redis-cli: apt-get install redis-server redis-sentinel redis-tools)", c, err)
		}
	}
}

// freePort returns a 127.0.0.1 address with a port free a moment ago. The
// server binds it with SO_REUSEADDR, and keeps it across restarts. The
// port is below the ephemeral ranges (Linux's from 32768, IANA's from
// 49152): a port the kernel picked there (":0") may be handed to another
// test's outgoing connection before the server binds it, and the server
// then fails to start.
func freePort(t TB) string {
	t.Helper()
	const low, high = 20000, 32768
	for range 100 {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(low+mrand.IntN(high-low)))
		if ln, err := net.Listen("tcp", addr); err == nil {
			ln.Close()
			return addr
		}
	}
	t.Fatalf("no free port between %d and %d", low, high)
	return ""
}

// Start starts the server (again).
func (p *Private) Start() {
	p.t.Helper()
	port := "0" // no TCP
	if p.Addr != "" {
		_, port, _ = net.SplitHostPort(p.Addr)
	}
	var args []string
	if p.config != "" {
		args = append(args, p.config) // a config file must come first
	}
	args = append(args, "--port", port, "--bind", "127.0.0.1", "--unixsocket", p.Socket, "--unixsocketperm", "700",
		"--enable-debug-command", "local", "--dir", p.Dir, "--save", "", "--appendonly", "yes", "--appendfsync", "always",
		"--logfile", filepath.Join(p.Dir, "redis.log"))
	p.cmd = exec.Command("redis-server", args...)
	if err := p.cmd.Start(); err != nil {
		p.t.Fatalf("starting redis-server: %v", err)
	}
	WaitFor(p.t, 10*time.Second, "redis-server to accept connections on "+p.Socket+" (see "+filepath.Join(p.Dir, "redis.log")+")", func() bool {
		return canDial("unix", p.Socket) && (p.Addr == "" || canDial("tcp", p.Addr))
	})
}

// Stop is a clean shutdown: on SIGTERM Redis flushes the AOF and exits.
func (p *Private) Stop() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.cmd.Wait()
	p.cmd = nil
}

// Client returns a client of the server, closed when the test ends.
func (p *Private) Client(t testing.TB) redis.UniversalClient {
	rdb := redis.NewClient(&redis.Options{Network: "unix", Addr: p.Socket,
		DialTimeout: 200 * time.Millisecond, ReadTimeout: time.Second, WriteTimeout: time.Second, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// Stall makes the server stop answering everyone for d (DEBUG SLEEP, as
// a long fork or a slow disk does) and returns once any command sent
// afterwards, on any connection, waits for the stall to end: a client that
// merely saw a slow reply (a loaded test machine) is not taken for a
// stalled server. d should be well over 50 ms, the probe's patience. The
// sleep's reply is awaited when the test ends.
func (p *Private) Stall(t testing.TB, d time.Duration) {
	t.Helper()
	conn, err := net.Dial("unix", p.Socket)
	if err != nil {
		t.Fatalf("connecting to stall Redis: %v", err)
	}
	replies := bufio.NewReader(conn)
	reply := func(what, want string, within time.Duration) {
		t.Helper()
		conn.SetReadDeadline(time.Now().Add(within))
		got, err := replies.ReadString('\n')
		if err != nil || got != want {
			t.Errorf("%s: reply %q, %v", what, got, err)
		}
	}
	// A PING answered first: Redis has accepted this connection and reads
	// it as it reads every client's, in the order their bytes arrived, so
	// the sleep written next is read ahead of anything sent afterwards.
	// Without it, a command on a connection Redis already served can be
	// read in the same turn of its loop that accepts this one.
	if _, err := io.WriteString(conn, "*1\r\n$4\r\nPING\r\n"); err != nil {
		conn.Close()
		t.Fatalf("sending PING: %v", err)
	}
	reply("PING before the stall", "+PONG\r\n", 10*time.Second)
	secs := strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
	if _, err := fmt.Fprintf(conn, "*3\r\n$5\r\nDEBUG\r\n$5\r\nSLEEP\r\n$%d\r\n%s\r\n", len(secs), secs); err != nil {
		conn.Close()
		t.Fatalf("sending DEBUG SLEEP: %v", err)
	}
	t.Cleanup(func() {
		defer conn.Close()
		reply("DEBUG SLEEP "+secs, "+OK\r\n", 2*d+5*time.Second)
	})
	// Confirm it (DEBUG may be refused): a ping sent now waits for the
	// sleep, so it times out.
	probe := redis.NewClient(&redis.Options{Network: "unix", Addr: p.Socket, ReadTimeout: 50 * time.Millisecond, MaxRetries: -1})
	defer probe.Close()
	WaitFor(t, d/2, "Redis to stall", func() bool { return probe.Ping(context.Background()).Err() != nil })
}

func canDial(network, address string) bool {
	c, err := net.Dial(network, address)
	if err == nil {
		c.Close()
	}
	return err == nil
}

// WaitFor polls cond until it holds or the deadline passes.
func WaitFor(t TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Uniq returns a name unique to this test run, for namespaces and queues.
func Uniq(prefix string) string {
	var b [4]byte
	rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// Keys returns the keys that match pattern, by SCAN, not KEYS: on the
// shared server KEYS holds Redis for as long as it reads every key of every
// test, and the runtime's calls in the tests beside it time out meanwhile.
func Keys(ctx context.Context, rdb redis.UniversalClient, pattern string) ([]string, error) {
	var keys []string
	iter := rdb.Scan(ctx, 0, pattern, 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	return keys, iter.Err()
}
