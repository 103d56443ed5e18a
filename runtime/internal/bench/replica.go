package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// A replica process runs one scheduler, belfry's or asynq's, with a
// per-second schedule, and prints "ENQ <task id> <unix nanos>" for every
// task it enqueued. Processes, not goroutines, so that SIGKILL and SIGTERM
// are the real thing.
const replicaEnv = "BELFRY_BENCH_REPLICA"

type replicaConfig struct {
	mode, redisAddr, namespace, queue, name string
	ttl                                     time.Duration
}

func (c replicaConfig) env() []string {
	return append(os.Environ(),
		replicaEnv+"="+c.mode, "BENCH_REDIS="+c.redisAddr, "BENCH_NS="+c.namespace,
		"BENCH_QUEUE="+c.queue, "BENCH_NAME="+c.name, "BENCH_TTL="+c.ttl.String())
}

func replicaMain(mode string) {
	ttl, _ := time.ParseDuration(os.Getenv("BENCH_TTL"))
	queue := os.Getenv("BENCH_QUEUE")
	out := bufio.NewWriter(os.Stdout)
	events := make(chan enqueueEvent, 1024)
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("BENCH_REDIS")})
	rdb.AddHook(newEnqueueHook(queue, func(e enqueueEvent) { events <- e }))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case e := <-events:
				fmt.Fprintf(out, "ENQ %s %d\n", e.taskID, e.at.UnixNano())
				out.Flush()
			case <-ctx.Done():
				return
			}
		}
	}()
	switch mode {
	case "belfry":
		reg := registry.MustNew(registry.Schedule{Name: "tick", Expr: "* * * * * *", Queue: queue,
			Handler: func(context.Context, registry.Occurrence) error { return nil }})
		rt, err := runtime.New(reg, runtime.Options{Redis: rdb, Namespace: os.Getenv("BENCH_NS"),
			Replica: os.Getenv("BENCH_NAME"), LeaseTTL: ttl,
			Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		rt.Run(ctx)
		rt.Close()
	case "asynq":
		s := asynq.NewSchedulerFromRedisClient(rdb, &asynq.SchedulerOpts{Location: time.UTC, LogLevel: asynq.FatalLevel})
		if _, err := s.Register("@every 1s", asynq.NewTask("tick", nil), asynq.Queue(queue)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		if err := s.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		<-ctx.Done()
		s.Shutdown()
	}
	<-done
	rdb.Close()
}

// replicaProc is a running replica process seen from the harness.
type replicaProc struct {
	cfg replicaConfig
	cmd *exec.Cmd
}

func startReplica(cfg replicaConfig, log *eventLog) (*replicaProc, error) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = cfg.env()
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go readEvents(stdout, log)
	return &replicaProc{cfg: cfg, cmd: cmd}, nil
}

func readEvents(r io.Reader, log *eventLog) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 || f[0] != "ENQ" {
			continue
		}
		ns, err := strconv.ParseInt(f[2], 10, 64)
		if err == nil {
			log.add(enqueueEvent{taskID: f[1], at: time.Unix(0, ns)})
		}
	}
}

func (p *replicaProc) signal(sig os.Signal) { p.cmd.Process.Signal(sig) }

func (p *replicaProc) wait() { p.cmd.Wait() }

// stop ends the replica gracefully and waits for it.
func (p *replicaProc) stop() {
	p.signal(syscall.SIGTERM)
	p.wait()
}
