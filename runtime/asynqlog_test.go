package runtime_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/belfry/belfry/runtime"
	"github.com/hibiken/asynq"
)

func TestAsynqLoggerWritesThroughSlogAtItsLevel(t *testing.T) {
	var buf bytes.Buffer
	l := runtime.AsynqLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
	l.Debug("hidden")
	l.Warn("queue ", "default", " paused")
	out := buf.String()
	if strings.Contains(out, "hidden") || !strings.Contains(out, `level=WARN msg="queue default paused"`) {
		t.Errorf("log = %q, want one WARN line reading %q", out, "queue default paused")
	}
	for level, want := range map[slog.Level]asynq.LogLevel{
		slog.LevelDebug: asynq.DebugLevel, slog.LevelInfo: asynq.InfoLevel,
		slog.LevelWarn: asynq.WarnLevel, slog.LevelError: asynq.ErrorLevel, slog.LevelInfo + 2: asynq.WarnLevel,
	} {
		if got := runtime.AsynqLogLevel(level); got != want {
			t.Errorf("AsynqLogLevel(%s) = %v, want %v", level, got, want)
		}
	}
}
