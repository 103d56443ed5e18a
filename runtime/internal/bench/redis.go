package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/belfry/belfry/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// privateRedis is the redis-server every measurement runs against, on a
// free loopback port so that replica processes can reach it.
type privateRedis struct {
	addr string
	dir  string
	cmd  *exec.Cmd
	// priority is the CPU priority redis-server runs at: "default", or
	// the niceness redisNiceEnv set.
	priority string
}

// redisNiceEnv names the niceness to run redis-server at, for an
// experiment; unset, it runs at the default priority. On a 2-core
// machine Redis shares its cores with the leader, the followers and the
// bench's clients, and the kernel can take the core from Redis in the
// middle of a command, which SLOWLOG counts as that command's time. A
// higher priority (BENCH_REDIS_NICE=-10, as root or with CAP_SYS_NICE)
// was tried as the default to keep such waits out; alternated with the
// default it moved the fall-back's p99 down but the 100k spike's last
// enqueue up, within the noise of a shared host (BENCHMARKS.md, "Method"),
// so the default stays.
const redisNiceEnv = "BENCH_REDIS_NICE"

func startRedis() (*privateRedis, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir, err := os.MkdirTemp("", "belfry-bench-")
	if err != nil {
		return nil, err
	}
	p := &privateRedis{addr: "127.0.0.1:" + strconv.Itoa(port), dir: dir}
	p.cmd = exec.Command("redis-server", "--bind", "127.0.0.1", "--port", strconv.Itoa(port),
		"--save", "", "--appendonly", "no", "--dir", dir, "--logfile", filepath.Join(dir, "redis.log"))
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting redis-server (is it installed?): %w", err)
	}
	p.priority = "default"
	if v := os.Getenv(redisNiceEnv); v != "" {
		// Setpriority of a PID sets its main thread's, the one that runs
		// every command; Redis's background threads keep the default.
		nice, err := strconv.Atoi(v)
		if err == nil {
			err = syscall.Setpriority(syscall.PRIO_PROCESS, p.cmd.Process.Pid, nice)
		}
		if err != nil {
			p.stop()
			return nil, fmt.Errorf("%s=%s: %w", redisNiceEnv, v, err)
		}
		p.priority = "nice " + v
	}
	rdb := redis.NewClient(&redis.Options{Addr: p.addr})
	defer rdb.Close()
	for deadline := time.Now().Add(10 * time.Second); rdb.Ping(context.Background()).Err() != nil; {
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("redis-server on %s did not answer", p.addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return p, nil
}

func (p *privateRedis) stop() {
	if p.cmd != nil && p.cmd.Process != nil {
		p.cmd.Process.Signal(os.Interrupt)
		p.cmd.Wait()
	}
	os.RemoveAll(p.dir)
}

// totalCalls sums the calls of every command from INFO commandstats.
func totalCalls(ctx context.Context, rdb *redis.Client) (int64, error) {
	stats, err := redistest.CommandStats(ctx, rdb)
	var total int64
	for _, st := range stats {
		total += st.Calls
	}
	return total, err
}

// redisCPU is the CPU time Redis has used, user and system, from INFO cpu:
// a single Redis's (clusterRedisCPU sums a cluster's nodes).
func redisCPU(ctx context.Context, rdb redis.UniversalClient) (time.Duration, error) {
	info, err := rdb.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, err
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		name, value, _ := strings.Cut(strings.TrimSpace(line), ":")
		if name == "used_cpu_sys" || name == "used_cpu_user" {
			secs, err := strconv.ParseFloat(value, 64)
			if err != nil {
				return 0, fmt.Errorf("INFO cpu %s: %w", name, err)
			}
			total += secs
		}
	}
	return time.Duration(total * float64(time.Second)), nil
}

// coreWait is how long Redis's main thread, the one that runs every
// command, has waited for a core since it started, and how many times the
// kernel took the core from it while it could still run (the kernel's
// schedstat and nonvoluntary_ctxt_switches for the process_id INFO server
// gives). On a machine of few cores a wait in the middle of a command is
// counted by SLOWLOG as the command's own time. known is false when Redis
// is not a process of this machine.
type coreWait struct {
	wait      time.Duration
	preempted int64
	known     bool
}

func redisCoreWait(ctx context.Context, rdb *redis.Client) coreWait {
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return coreWait{}
	}
	var pid string
	for _, line := range strings.Split(info, "\n") {
		if v, found := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); found {
			pid = v
		}
	}
	task := "/proc/" + pid + "/task/" + pid + "/"
	stat, err1 := os.ReadFile(task + "schedstat")
	status, err2 := os.ReadFile(task + "status")
	if pid == "" || err1 != nil || err2 != nil {
		return coreWait{}
	}
	// On the CPU (ns), waiting for a core (ns), times run.
	f := strings.Fields(string(stat))
	if len(f) != 3 {
		return coreWait{}
	}
	ns, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return coreWait{}
	}
	w := coreWait{wait: time.Duration(ns)}
	for _, line := range strings.Split(string(status), "\n") {
		if v, found := strings.CutPrefix(line, "nonvoluntary_ctxt_switches:"); found {
			w.preempted, err = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			w.known = err == nil
		}
	}
	return w
}

// processCPU is the CPU time this process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// enqueueEvent is one successful asynq enqueue, seen from the client.
type enqueueEvent struct {
	taskID string
	at     time.Time
}

// newEnqueueHook reports every successful asynq enqueue of a queue's tasks
// (asynq's enqueue script, or belfry's batch of them, returned 1 for it),
// when its reply reaches the client, so belfry and asynq's Scheduler are
// timed alike.
func newEnqueueHook(queue string, onEvent func(enqueueEvent)) redis.Hook {
	return redistest.EnqueueHook(queue, func(e redistest.Enqueue) {
		if e.Inserted {
			onEvent(enqueueEvent{taskID: e.TaskID, at: e.At})
		}
	}, nil)
}

// addHook adds h so that it sees every command rdb sends. On a cluster
// client that is each node's client, as it is made: a hook of the cluster
// client itself misses the commands of a transaction (WATCH), which go
// through a node's connection directly, as belfry's acknowledged enqueue
// does. rdb must not have sent a command yet.
func addHook(rdb redis.UniversalClient, h redis.Hook) {
	if c, ok := rdb.(*redis.ClusterClient); ok {
		c.OnNewNode(func(node *redis.Client) { node.AddHook(h) })
		return
	}
	rdb.AddHook(h)
}

// eventLog collects enqueue events from any goroutine.
type eventLog struct {
	mu     sync.Mutex
	events []enqueueEvent
	added  chan struct{}
}

func newEventLog() *eventLog { return &eventLog{added: make(chan struct{}, 1)} }

func (l *eventLog) add(e enqueueEvent) {
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
	select {
	case l.added <- struct{}{}:
	default:
	}
}

func (l *eventLog) snapshot() []enqueueEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]enqueueEvent(nil), l.events...)
}

// waitUntil waits for cond, re-checking on every new event and at least
// every 10ms, until the deadline.
func (l *eventLog) waitUntil(deadline time.Time, cond func([]enqueueEvent) bool) bool {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if cond(l.snapshot()) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-l.added:
		case <-tick.C:
		}
	}
}
