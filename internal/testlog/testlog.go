// Package testlog is a slog logger that writes to a test's log while the
// test runs.
package testlog

import (
	"log/slog"
	"os"
	"sync"
	"testing"
)

// New returns a logger of level and above that writes each record to t's
// log until t ends, then to standard error. A goroutine the test started
// may log after it ends (a worker finishing its task after its server's
// shutdown gave up waiting): testing forbids that, and a log racing with
// the end of the test is a data race in testing itself.
func New(t testing.TB, level slog.Level) *slog.Logger {
	w := &writer{t: t}
	t.Cleanup(w.end)
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

type writer struct {
	mu    sync.Mutex
	t     testing.TB
	ended bool
}

func (w *writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ended {
		return os.Stderr.Write(p)
	}
	w.t.Log(string(p[:len(p)-1]))
	return len(p), nil
}

// end sends what follows to standard error; it waits for a write to t
// under way.
func (w *writer) end() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ended = true
}
