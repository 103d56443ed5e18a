package testlog_test

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/belfry/belfry/internal/testlog"
)

// endingTB is a test whose end (its cleanups) the test below decides.
type endingTB struct {
	testing.TB
	logs     []string
	cleanups []func()
}

func (e *endingTB) Log(args ...any)  { e.logs = append(e.logs, fmt.Sprint(args...)) }
func (e *endingTB) Cleanup(f func()) { e.cleanups = append(e.cleanups, f) }
func (e *endingTB) end() {
	for i := len(e.cleanups) - 1; i >= 0; i-- {
		e.cleanups[i]()
	}
}

// What is logged while the test runs goes to its log; what a goroutine
// logs after it ended does not.
func TestALogAfterTheTestEndsStaysOutOfIt(t *testing.T) {
	tb := &endingTB{TB: t}
	log := testlog.New(tb, slog.LevelInfo)
	log.Info("while it runs")
	log.Debug("below the level")
	tb.end()
	log.Info("after it ended")
	if len(tb.logs) != 1 || !strings.Contains(tb.logs[0], `msg="while it runs"`) {
		t.Errorf("the test's log: %q; want the one line logged while it ran", tb.logs)
	}
}
