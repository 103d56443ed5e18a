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

	"github.com/belfry/belfry/runtime/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// privateRedis is the redis-server every measurement runs against, on a
// free loopback port so that replica processes can reach it.
type privateRedis struct {
	addr string
	dir  string
	cmd  *exec.Cmd
	// priority says at which CPU priority redis-server runs (see
	// redisNice), or why it runs at the default one.
	priority string
}

// redisNice is the niceness the bench gives redis-server when it may
// (root, or CAP_SYS_NICE). On this 2-core machine Redis shares its cores
// with the leader, the followers and the bench's own clients; at the
// default priority the kernel takes the core from Redis in the middle of a
// command for a time slice of a few milliseconds, which SLOWLOG counts as
// that command's time and the fire and spike latencies count as belfry's.
// A production Redis has a core of its own; a higher priority is the
// nearest a shared 2-core machine comes to that, and measures what a
// command costs Redis rather than when the kernel let it run. asynq's
// Scheduler, measured side by side, uses the same Redis at the same
// priority. BENCH_REDIS_NICE=0 keeps the default, to compare.
const redisNice = -10

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
	p.priority = fmt.Sprintf("nice %d", redisNice)
	// Setpriority of a PID sets its main thread's, the one that runs
	// every command; Redis's background threads (lazy free, fsync) keep
	// the default.
	if os.Getenv("BENCH_REDIS_NICE") == "0" {
		p.priority = "nice 0 (BENCH_REDIS_NICE=0)"
	} else if err := syscall.Setpriority(syscall.PRIO_PROCESS, p.cmd.Process.Pid, redisNice); err != nil {
		p.priority = fmt.Sprintf("nice 0 (could not set %d: %v)", redisNice, err)
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
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, err
	}
	var total int64
	for _, line := range strings.Split(info, "\n") {
		if !strings.HasPrefix(line, "cmdstat_") {
			continue
		}
		_, rest, _ := strings.Cut(line, "calls=")
		n, _ := strconv.ParseInt(strings.SplitN(rest, ",", 2)[0], 10, 64)
		total += n
	}
	return total, nil
}

// redisCPU is the CPU time Redis has used, user and system, from INFO cpu.
func redisCPU(ctx context.Context, rdb *redis.Client) (time.Duration, error) {
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
