package lease

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/belfry/belfry/internal/redistest"
	"github.com/belfry/belfry/runtime/internal/clock"
	"github.com/belfry/belfry/runtime/internal/store"
)

// recordedLogs keeps every record a logger writes, for tests of what a
// lease says and at which level.
type recordedLogs struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *recordedLogs) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordedLogs) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *recordedLogs) WithGroup(string) slog.Handler            { return h }
func (h *recordedLogs) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r.Clone())
	return nil
}

// take returns the records logged since the last take.
func (h *recordedLogs) take() []slog.Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.records
	h.records = nil
	return out
}

// loggedLease is a lease of its own namespace (or of keys, if given) whose
// logs h keeps.
func loggedLease(t *testing.T, replica string, h *recordedLogs, keys ...store.Keys) *Lease {
	t.Helper()
	k := store.NewKeys(redistest.Uniq("lease"))
	if len(keys) > 0 {
		k = keys[0]
	}
	return New(Config{Redis: redistest.Shared(t), Keys: k, Replica: replica,
		TTL: time.Second, Clock: clock.NewStub(time.Now()), Log: slog.New(h)})
}

// leadingLease is a loggedLease that holds its lease, with the logs of
// acquiring it taken.
func leadingLease(t *testing.T, h *recordedLogs) *Lease {
	t.Helper()
	l := loggedLease(t, "r0", h)
	if _, err := l.Acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.take()
	return l
}

func attrOf(r slog.Record, key string) string {
	var v string
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v = a.Value.String()
			return false
		}
		return true
	})
	return v
}

// A graceful shutdown gives the lease up on purpose: an INFO that says it
// was released, never the WARN of a lease lost.
func TestReleaseLogsAReleaseNotALoss(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	logs := &recordedLogs{}
	l := leadingLease(t, logs)
	l.Release(ctx)
	got := logs.take()
	if len(got) != 1 {
		t.Fatalf("Release logged %d records, want 1: %v", len(got), got)
	}
	r := got[0]
	if r.Level != slog.LevelInfo || !strings.HasPrefix(r.Message, "lease released") || strings.Contains(r.Message, "lost") {
		t.Errorf("Release logged %v %q, want INFO \"lease released ...\"", r.Level, r.Message)
	}
	if attrOf(r, "reason") != "shutting down" || !strings.HasPrefix(attrOf(r, "lease"), "r0|") {
		t.Errorf("Release logged reason=%q lease=%q, want reason=\"shutting down\" and the lease value", attrOf(r, "reason"), attrOf(r, "lease"))
	}

	// A follower that never held the lease has nothing to release or say.
	follower := loggedLease(t, "r1", logs)
	follower.Release(ctx)
	if got := logs.take(); len(got) != 0 {
		t.Errorf("a follower's Release logged %v", got)
	}
}

// A lease taken away stays a WARN: the replica did not choose to stop.
func TestLosingTheLeaseWarns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	logs := &recordedLogs{}
	l := leadingLease(t, logs)
	if err := l.rdb.Set(ctx, l.keys.Lease, "other|999", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	got := logs.take()
	if len(got) != 1 || got[0].Level != slog.LevelWarn || !strings.HasPrefix(got[0].Message, "lease lost") {
		t.Fatalf("a refused renewal logged %v, want one WARN \"lease lost ...\"", got)
	}
}

// A handover is asked for: the holder releases the lease, at INFO.
func TestHandoverLogsARelease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	logs := &recordedLogs{}
	l0 := leadingLease(t, logs)
	l1 := loggedLease(t, "r1", &recordedLogs{}, l0.keys)
	if _, err := l1.Acquire(ctx); err != nil { // a follower heartbeats
		t.Fatal(err)
	}
	if outcome, _, err := l0.Handover(ctx, "deploy", time.Minute, time.Hour); err != nil || outcome != HandedOver {
		t.Fatalf("handover to a live follower: %v %v", outcome, err)
	}
	got := logs.take()
	if len(got) != 1 || got[0].Level != slog.LevelInfo || !strings.HasPrefix(got[0].Message, "lease released") ||
		!strings.HasPrefix(attrOf(got[0], "reason"), "handed over (deploy)") {
		t.Fatalf("a handover logged %v, want one INFO \"lease released ...\" with reason \"handed over (deploy) ...\"", got)
	}
}
