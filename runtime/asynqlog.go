package runtime

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/hibiken/asynq"
)

// AsynqLogger adapts l for asynq.Config.Logger, so a service that runs
// asynq's workers beside the runtime keeps one log format. Fatal logs at
// error level and exits, which is what asynq expects of it.
func AsynqLogger(l *slog.Logger) asynq.Logger { return asynqLogger{l} }

// AsynqLogLevel is asynq's level for a slog level, for asynq.Config.LogLevel.
func AsynqLogLevel(l slog.Level) asynq.LogLevel {
	switch {
	case l <= slog.LevelDebug:
		return asynq.DebugLevel
	case l <= slog.LevelInfo:
		return asynq.InfoLevel
	case l <= slog.LevelWarn:
		return asynq.WarnLevel
	}
	return asynq.ErrorLevel
}

type asynqLogger struct{ l *slog.Logger }

func (a asynqLogger) Debug(args ...any) { a.l.Debug(fmt.Sprint(args...)) }
func (a asynqLogger) Info(args ...any)  { a.l.Info(fmt.Sprint(args...)) }
func (a asynqLogger) Warn(args ...any)  { a.l.Warn(fmt.Sprint(args...)) }
func (a asynqLogger) Error(args ...any) { a.l.Error(fmt.Sprint(args...)) }
func (a asynqLogger) Fatal(args ...any) {
	a.l.Error(fmt.Sprint(args...))
	os.Exit(1)
}
