package core

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test stops what it starts: runtimes, asynq servers, subscriptions.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
