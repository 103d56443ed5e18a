package core

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/belfry/belfry/internal/redistest"
	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/engine"
	"github.com/belfry/belfry/runtime/internal/clock"
	"github.com/belfry/belfry/runtime/internal/redisengine"
)

// A cluster's answers that it cannot serve for now, as namingEngine
// names them (engine.Unavailable).
var (
	errClusterDown = errors.New("CLUSTERDOWN The cluster is down")
	errMoved       = errors.New("MOVED 3999 127.0.0.1:6381")
)

// namingEngine is the Redis engine, configured, that names errClusterDown
// and errMoved as a cluster client's engine names those answers, so that
// the outage log can be driven through each kind without a cluster.
type namingEngine struct{ engine.Engine }

func (namingEngine) Unavailable(err error) string {
	switch {
	case errors.Is(err, errClusterDown):
		return "redis cluster unavailable (CLUSTERDOWN)"
	case errors.Is(err, errMoved):
		return "redis cluster reconfiguring (MOVED: a slot changed masters)"
	}
	return ""
}

// namingPending configures its Pending and hands the core a namingEngine.
type namingPending struct{ *redisengine.Pending }

func (p namingPending) Configure(cfg engine.Config) (engine.Engine, error) {
	configured, err := p.Pending.Configure(cfg)
	return namingEngine{configured}, err
}

// The outage log says what health says: a timeout is Redis slow, a failed
// connection Redis unreachable, an answer the engine names is named so. It
// says it again, with what it was, when the outage changes to a kind not
// yet said while it lasts (slow and unreachable being one kind: a Redis
// gone gives both by turns): not once per error, nor once per switch
// between two kinds.
func TestTheOutageLogNamesEachChangeOfKindOnce(t *testing.T) {
	var logs bytes.Buffer
	dropTime := func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}
	r, err := newRuntime(registry.MustNew(registry.Schedule{Name: "tick", Expr: "* * * * * *", Queue: redistest.Uniq("q"),
		Handler: func(context.Context, registry.Occurrence) error { return nil }}),
		Options{Engine: namingPending{redisengine.NewPending(redistest.Shared(t))}, Namespace: redistest.Uniq("internal"), Replica: "r0",
			Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{ReplaceAttr: dropTime}))}, clock.Real{})
	if err != nil {
		t.Fatal(err)
	}
	timeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	clusterDown := fmt.Errorf("renewing the lease: %w", errClusterDown)
	moved := fmt.Errorf("reading the cursors: %w", errMoved)
	if !isSlow(timeout) || isSlow(refused) {
		t.Fatalf("isSlow(%v) = %t, isSlow(%v) = %t; want a timeout slow and a refusal not", timeout, isSlow(timeout), refused, isSlow(refused))
	}

	for _, err := range []error{timeout, timeout, refused, refused, timeout, refused, clusterDown, clusterDown, moved, nil, nil, timeout, nil} {
		r.noteRedis(err)
	}
	want := []string{
		`level=ERROR msg="redis slow; retrying with backoff" replica=r0 err="read tcp: i/o timeout"`,
		`level=ERROR msg="redis cluster unavailable (CLUSTERDOWN); retrying with backoff" replica=r0 err="renewing the lease: CLUSTERDOWN The cluster is down" was="redis slow"`,
		`level=ERROR msg="redis cluster reconfiguring (MOVED: a slot changed masters); retrying with backoff" replica=r0 err="reading the cursors: MOVED 3999 127.0.0.1:6381" was="redis cluster unavailable (CLUSTERDOWN)"`,
		`level=INFO msg="redis serving again" replica=r0 was="redis cluster reconfiguring (MOVED: a slot changed masters)"`,
		`level=ERROR msg="redis slow; retrying with backoff" replica=r0 err="read tcp: i/o timeout"`,
		`level=INFO msg="redis reachable again" replica=r0`,
	}
	got := strings.Split(strings.TrimSuffix(logs.String(), "\n"), "\n")
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the outage log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// Health names writes that replicas do not acknowledge as the log does,
// not as Redis unreachable: Redis answered, its replicas did not.
func TestHealthNamesUnacknowledgedWritesAsTheLogDoes(t *testing.T) {
	var logs bytes.Buffer
	r, err := newRuntime(registry.MustNew(registry.Schedule{Name: "tick", Expr: "* * * * * *", Queue: redistest.Uniq("q"),
		Handler: func(context.Context, registry.Occurrence) error { return nil }}),
		Options{Engine: redisengine.NewPending(redistest.Shared(t)), Namespace: redistest.Uniq("internal"), Replica: "r0",
			Logger: slog.New(slog.NewTextHandler(&logs, nil))}, clock.Real{})
	if err != nil {
		t.Fatal(err)
	}
	r.noteRedis(fmt.Errorf("enqueueing: %w", ErrNotAcked))
	const want = "redis replicas do not acknowledge writes"
	if state, name, _ := r.redisView(); state != RedisDown || name != want {
		t.Errorf("Redis after an unacknowledged write: %s, named %q; want down, named %q", state, name, want)
	}
	if !strings.Contains(logs.String(), want+"; retrying with backoff") {
		t.Errorf("the log: %s; want %q", logs.String(), want)
	}
}
