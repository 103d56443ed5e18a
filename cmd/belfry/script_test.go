package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/belfry/belfry/internal/pgtest"
	"github.com/belfry/belfry/internal/scripttest"
	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
	"github.com/belfry/belfry/runtime/admin"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/rogpeppe/go-internal/testscript"
)

// TestMain lets the test binary run as the belfry command of the scripts
// under testdata/script.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){"belfry": main})
}

// TestScript runs the scripts in testdata/script, each against a live
// service of its own: a runtime on the real Redis (a namespace and queue
// of its own) running its scheduler and workers, with the admin mounted at
// $BELFRY_URL, and the same admin behind an authentication that wants
// "Authorization: Bearer s3cret" at $AUTH_URL.
func TestScript(t *testing.T) {
	t.Parallel()
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		Setup:               startService,
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exitcode":   scripttest.ExitCode,
			"eventually": eventually,
			"createdb":   createDB,
			"addmembers": addMembers,
		},
	})
}

// redisAddr is the shared test Redis. It must answer: a missing Redis
// fails the tests, never skips them.
func redisAddr() string {
	if a := os.Getenv("BELFRY_TEST_REDIS"); a != "" {
		return a
	}
	return "127.0.0.1:6379"
}

func uniq(prefix string) string {
	b := make([]byte, 6)
	rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// The service's schedules.
const (
	nightlyExpr = "17 3 * * *"
	nightlyZone = "Europe/Berlin"
)

func startService(env *testscript.Env) error {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr()})
	env.Defer(func() { rdb.Close() })
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		return fmt.Errorf("redis at %s: %v (the CLI's tests need a real redis-server; set BELFRY_TEST_REDIS)", redisAddr(), err)
	}
	queue := uniq("q")
	ok := func(context.Context, registry.Occurrence) error { return nil }
	reg := registry.MustNew(
		registry.Schedule{Name: "nightly", Expr: nightlyExpr, Zone: nightlyZone, Queue: queue, Handler: ok},
		registry.Schedule{Name: "fails", Expr: "0 4 * * *", Zone: "UTC", Queue: queue,
			Handler: func(context.Context, registry.Occurrence) error { return errors.New("disk full") }},
		registry.Schedule{Name: "weekly-report", Expr: "0 9 * * MON", Zone: "Europe/London", Per: "tenant", Queue: queue, Handler: ok},
	)
	rt, err := runtime.New(reg, runtime.Options{Redis: rdb, Namespace: uniq("cli"), Replica: "r0",
		LeaseTTL: 2 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	workers := asynq.NewServerFromRedisClient(rdb, asynq.Config{Queues: map[string]int{queue: 1}, Concurrency: 2,
		TaskCheckInterval: 20 * time.Millisecond, LogLevel: asynq.FatalLevel})
	mux := asynq.NewServeMux()
	rt.RegisterHandlers(mux)
	if err := workers.Start(mux); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { rt.Run(ctx); close(done) }()
	env.Defer(func() { cancel(); <-done; workers.Shutdown(); rt.Close() })
	for deadline := time.Now().Add(10 * time.Second); !rt.Leadership().Leading(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			return errors.New("the service's replica did not take the lease within 10s")
		}
	}

	env.Values[runtimeKey{}] = rt

	service := mounted(admin.New(rt, admin.Options{}))
	open := httptest.NewServer(service)
	env.Defer(open.Close)
	lossy := httptest.NewServer(loseFirstAnswer(service))
	env.Defer(lossy.Close)
	auth := httptest.NewServer(mounted(admin.New(rt, admin.Options{Middleware: requireBearer("s3cret")})))
	env.Defer(auth.Close)

	nightly, _ := reg.Lookup("nightly")
	now := time.Now()
	last := nightly.Prev(now) // at or before: the newest past slot
	third := nightly.Prev(nightly.Prev(last.Add(-time.Second)).Add(-time.Second))
	for k, v := range map[string]string{
		"BELFRY_URL":    open.URL + "/cron",
		"AUTH_URL":      auth.URL + "/cron",
		"LOSSY_URL":     lossy.URL + "/cron",
		"BELFRY_ACTOR":  "alice@oncall",
		"NIGHTLY_SLOT":  last.UTC().Format(time.RFC3339),
		"NIGHTLY_LOCAL": last.In(nightly.Location()).Format("2006-01-02 15:04:05 MST"),
		"NOT_A_SLOT":    last.Add(time.Minute).UTC().Format(time.RFC3339),
		"FUTURE_SLOT":   nightly.Next(now).UTC().Format(time.RFC3339),
		"BACKFILL_FROM": third.UTC().Format(time.RFC3339),
		"BACKFILL_TO":   last.UTC().Format(time.RFC3339),
	} {
		env.Setenv(k, v)
	}
	return nil
}

// runtimeKey finds a script's runtime in its Values.
type runtimeKey struct{}

// addMembers gives the weekly-report family N members t0000… in UTC, in
// one call, for lists that take several pages:
//
//	addmembers 600
func addMembers(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: addmembers N")
	}
	n, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("addmembers: %v", err)
	}
	rt := ts.Value(runtimeKey{}).(*runtime.Runtime)
	ms := make([]runtime.Member, n)
	for i := range ms {
		ms[i] = runtime.Member{Key: fmt.Sprintf("t%04d", i), Zone: "UTC"}
	}
	if err := rt.Families().SetMany(context.Background(), "weekly-report", ms); err != nil {
		ts.Fatalf("addmembers: %v", err)
	}
}

// mounted serves the admin under /cron/, as a host does.
func mounted(h http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/cron/", http.StripPrefix("/cron", h))
	return mux
}

// loseFirstAnswer lets the service carry out the first POST and then
// closes the connection without its answer, as a proxy's timeout or a
// reset does after the work was done.
func loseFirstAnswer(next http.Handler) http.Handler {
	var lost atomic.Bool
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPost || !lost.CompareAndSwap(false, true) {
			next.ServeHTTP(w, req)
			return
		}
		next.ServeHTTP(httptest.NewRecorder(), req)
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			panic(err)
		}
		conn.Close()
	})
}

// requireBearer is a host's authentication in front of the admin.
func requireBearer(token string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if req.Header.Get("Authorization") != "Bearer "+token {
				http.Error(w, "unauthorized: this admin wants a bearer token", http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, req)
		})
	}
}

// eventually runs a command until its stdout matches a pattern, for what
// the service does in the background (a worker runs an occurrence):
//
//	eventually 'failing' belfry ls
func eventually(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: eventually PATTERN command [args...]")
	}
	re, err := regexp.Compile("(?m)" + args[0])
	if err != nil {
		ts.Fatalf("eventually: %v", err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		if scripttest.Status(ts, args[1], args[2:]...) == 0 && re.MatchString(ts.ReadFile("stdout")) {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("eventually: %s's output did not match %q within 15s; last:\n%s", args[1], args[0], ts.ReadFile("stdout"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// createDB creates an empty database, sets $PGURL to it, and drops it
// when the script ends. Postgres not answering fails the script.
func createDB(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: createdb")
	}
	dbURL, drop, err := pgtest.Create(context.Background(), "belfry_cli")
	if err != nil {
		ts.Fatalf("%v", err)
	}
	ts.Defer(func() { drop() })
	ts.Setenv("PGURL", dbURL)
}
