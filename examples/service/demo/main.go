// Demo runs the example service the way it runs in production, on one
// machine: a private Redis, three replicas as separate processes, one admin
// page per replica. Run it from the repository with
//
//	make demo          (or: go run ./examples/service/demo)
//	make demo/postgres (or: go run ./examples/service/demo -postgres URL)
//
// It uses redis-server when it is on PATH and an embedded Redis
// (miniredis) otherwise, so Go alone is enough. Ctrl-C stops the replicas,
// then Redis, and removes every file the demo made.
//
// With -postgres the replicas run on Postgres and River instead: the demo
// creates a database of its own on that server (-database, default
// belfry_demo; one a stopped demo left behind is made afresh), migrates
// it as a deploy step would, and drops it at the end.
//
// Flags: -port (first admin port, default $DEMO_PORT or 8080; replica i
// listens on port+i), -replicas, -lease-ttl, -embedded (use miniredis even
// when redis-server is installed), -postgres, -database.
package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/alicebob/miniredis/v2"
)

const servicePkg = "github.com/belfry/belfry/examples/service"

func main() {
	os.Exit(run())
}

type options struct {
	port     int
	replicas int
	leaseTTL time.Duration
	embedded bool
	postgres string
	database string
}

func parseFlags() (options, error) {
	var o options
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	defPort := 8080
	if p := os.Getenv("DEMO_PORT"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil {
			return o, fmt.Errorf("DEMO_PORT=%q is not a port number", p)
		}
		defPort = n
	}
	fs.IntVar(&o.port, "port", defPort, "admin port of the first replica; replica i uses port+i (default $DEMO_PORT or 8080)")
	fs.IntVar(&o.replicas, "replicas", 3, "number of replicas")
	// Shorter than the service's default so that a replica killed with
	// kill -9 is replaced while the visitor watches.
	fs.DurationVar(&o.leaseTTL, "lease-ttl", 5*time.Second, "lease TTL of each replica: how long a crashed leader blocks takeover")
	fs.BoolVar(&o.embedded, "embedded", false, "use the embedded Redis (miniredis) even if redis-server is installed")
	fs.StringVar(&o.postgres, "postgres", "", "run on Postgres and River: the `URL` of a database on the server to use (postgres://postgres@127.0.0.1:5432/postgres), where the demo makes its own")
	fs.StringVar(&o.database, "database", cmp.Or(os.Getenv("DEMO_DATABASE"), "belfry_demo"), "with -postgres, the `name` of the demo's database, made afresh and dropped at the end (default $DEMO_DATABASE or belfry_demo)")
	fs.SetOutput(io.Discard)
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(os.Stderr)
			fs.Usage()
		}
		return o, err
	}
	switch {
	case o.port < 1 || o.port+o.replicas-1 > 65535:
		return o, fmt.Errorf("-port %d: want 1..%d", o.port, 65535-o.replicas+1)
	case o.replicas < 1 || o.replicas > 9:
		return o, fmt.Errorf("-replicas %d: want 1..9", o.replicas)
	case !databaseName.MatchString(o.database):
		return o, fmt.Errorf("-database %q: want lower-case letters, digits and _, starting with a letter", o.database)
	}
	return o, nil
}

func run() int {
	o, err := parseFlags()
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v (see -h)\n", err)
		return 2
	}
	addrs := make([]string, o.replicas)
	for i := range addrs {
		addrs[i] = net.JoinHostPort("127.0.0.1", strconv.Itoa(o.port+i))
		// Checked up front: a replica that cannot listen would otherwise
		// fail after Redis and the others have started.
		ln, err := net.Listen("tcp", addrs[i])
		if err != nil {
			fmt.Fprintf(os.Stderr, "demo: %s is taken; pick other ports with -port N or DEMO_PORT=N (replicas use N..N+%d)\n", addrs[i], o.replicas-1)
			return 1
		}
		ln.Close()
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	dir, err := os.MkdirTemp("", "belfry-demo-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		return 1
	}
	defer func() {
		os.RemoveAll(dir)
		say("removed %s", dir)
	}()

	say("building the example service…")
	bin := filepath.Join(dir, "service")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, servicePkg)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "demo: go build %s: %v (run the demo from inside the belfry repository)\n", servicePkg, err)
		return 1
	}

	var engineArgs []string
	var storeDesc string
	var stopStore func()
	if o.postgres != "" {
		engineArgs, storeDesc, stopStore, err = startPostgres(ctx, o.postgres, o.database)
	} else {
		var redisURL string
		redisURL, storeDesc, stopStore, err = startRedis(ctx, dir, o.embedded)
		engineArgs = []string{"-redis", redisURL}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		return 1
	}
	defer stopStore()

	var out syncWriter
	exited := make(chan exit, o.replicas)
	var replicas []*exec.Cmd
	var wg sync.WaitGroup
	defer func() {
		// Children get SIGINT, the service's graceful shutdown: the leader
		// hands its lease over and running tasks finish. Stragglers are
		// killed so that Ctrl-C always ends the demo.
		for _, c := range replicas {
			c.Process.Signal(os.Interrupt)
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			for _, c := range replicas {
				c.Process.Kill()
			}
			<-done
		}
		say("replicas stopped")
	}()
	for i, addr := range addrs {
		name := "demo-" + strconv.Itoa(i+1)
		c := exec.Command(bin, append(engineArgs, "-http", addr, "-replica", name, "-lease-ttl", o.leaseTTL.String())...)
		c.Stdout = &prefixWriter{w: &out, prefix: name + " | "}
		c.Stderr = c.Stdout
		if err := c.Start(); err != nil {
			fmt.Fprintf(os.Stderr, "demo: starting %s: %v\n", name, err)
			return 1
		}
		replicas = append(replicas, c)
		wg.Go(func() {
			err := c.Wait()
			exited <- exit{name, cmp.Or(err, errors.New("exit status 0"))}
		})
	}

	if err := waitReady(ctx, addrs, exited); err != nil {
		if ctx.Err() == nil {
			fmt.Fprintf(os.Stderr, "demo: %v\n", err)
			return 1
		}
		return 0
	}
	var banner strings.Builder
	fmt.Fprintf(&banner, "\nbelfry demo: %d replicas of examples/service on %s\n\n", o.replicas, storeDesc)
	for i, addr := range addrs {
		label := "  admin  "
		if i > 0 {
			label = "         "
		}
		fmt.Fprintf(&banner, "%shttp://%s/cron/    replica demo-%d (pid %d)\n", label, addr, i+1, replicas[i].Process.Pid)
	}
	// Where the README's main.go serves health, on every replica.
	fmt.Fprintf(&banner, "  health http://%s/healthz  (every replica; /livez for liveness probes)\n", addrs[0])
	fmt.Fprintf(&banner, "\n  One replica holds the lease and enqueues; every replica's workers run tasks.\n")
	fmt.Fprintf(&banner, "  Kill the lease holder (kill -9 <pid>; the page names its pid) and another takes over within %s.\n", o.leaseTTL)
	fmt.Fprintf(&banner, "  Press Ctrl-C to stop everything.\n\n")
	out.Write([]byte(banner.String()))

	// A replica that dies is reported, not replaced: the banner invites the
	// visitor to kill the leader and watch the others take over.
	for running := o.replicas; running > 0; {
		select {
		case <-ctx.Done():
			say("stopping…")
			return 0
		case e := <-exited:
			if ctx.Err() != nil { // Ctrl-C in a terminal reaches the replicas too
				continue
			}
			running--
			say("replica %s exited (%v); %d still running", e.name, e.err, running)
		}
	}
	say("every replica has exited")
	return 1
}

type exit struct {
	name string
	err  error
}

// startRedis starts a Redis that only this demo uses and returns its URL.
func startRedis(ctx context.Context, dir string, embedded bool) (url, desc string, stop func(), err error) {
	if bin, lookErr := exec.LookPath("redis-server"); lookErr == nil && !embedded {
		socket := filepath.Join(dir, "redis.sock")
		cmd := exec.Command(bin, "--port", "0", "--unixsocket", socket, "--unixsocketperm", "700",
			"--dir", dir, "--save", "", "--appendonly", "no", "--logfile", filepath.Join(dir, "redis.log"))
		// A process group of its own: Ctrl-C in a terminal signals the
		// whole foreground group, and Redis must outlive the replicas'
		// graceful shutdown (they release the lease and clear their state
		// in it). The demo stops it last.
		cmd.SysProcAttr = redisProcAttr()
		if err := cmd.Start(); err != nil {
			return "", "", nil, fmt.Errorf("starting redis-server: %v", err)
		}
		stop = func() {
			cmd.Process.Signal(syscall.SIGTERM)
			cmd.Wait()
			say("redis-server stopped")
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			c, err := net.Dial("unix", socket)
			if err == nil {
				c.Close()
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				stop()
				log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
				return "", "", nil, fmt.Errorf("redis-server did not accept connections on %s: %v\n%s", socket, err, log)
			}
			time.Sleep(20 * time.Millisecond) // polling for readiness, bounded by the deadline
		}
		return "unix://" + socket, "a private redis-server (" + bin + ", unix socket " + socket + ")", stop, nil
	}
	m := miniredis.NewMiniRedis()
	// miniredis freezes TTLs unless told otherwise; the lease would then
	// never expire and a crashed leader would never be replaced.
	m.ClockTTL(true)
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return "", "", nil, fmt.Errorf("starting the embedded Redis: %v", err)
	}
	stop = func() {
		m.Close()
		say("embedded Redis stopped")
	}
	return "redis://" + m.Addr(), "an embedded Redis (miniredis at " + m.Addr() + "; install redis-server to use a real one)", stop, nil
}

// waitReady waits until every replica's admin API answers.
func waitReady(ctx context.Context, addrs []string, exited <-chan exit) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	for _, addr := range addrs {
		for {
			resp, err := client.Get("http://" + addr + "/cron/api/status")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("replica at %s did not answer within 30s", addr)
			case e := <-exited:
				return fmt.Errorf("replica %s exited during start-up (%v; its log is above)", e.name, e.err)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

func say(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "demo: "+format+"\n", args...)
}

// syncWriter serialises the replicas' output so lines never interleave.
type syncWriter struct{ mu sync.Mutex }

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return os.Stdout.Write(p)
}

// prefixWriter labels each complete line with the replica it came from.
type prefixWriter struct {
	w      io.Writer
	prefix string
	buf    []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			break
		}
		line := append([]byte(p.prefix), p.buf[:i+1]...)
		if _, err := p.w.Write(line); err != nil {
			return len(b), err
		}
		p.buf = p.buf[i+1:]
	}
	return len(b), nil
}
