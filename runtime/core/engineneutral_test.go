package core_test

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// engineDrivers are the packages that make code an engine's: the drivers
// and the Redis engine's internals.
var engineDrivers = []string{
	"github.com/redis/go-redis/",
	"github.com/hibiken/asynq",
	"github.com/jackc/pgx",
	"github.com/riverqueue/",
	"github.com/belfry/belfry/runtime/internal/store",
	"github.com/belfry/belfry/runtime/internal/lease",
	"github.com/belfry/belfry/runtime/internal/pipeline",
	"github.com/belfry/belfry/runtime/internal/redisengine",
}

// TestCoreIsEngineNeutral fails when the core, the engine contract, the
// admin or the metrics link a driver or the Redis engine's internals: a
// service on any engine links them, and only its own engine's driver.
func TestCoreIsEngineNeutral(t *testing.T) {
	t.Parallel()
	for _, pkg := range []string{"runtime/core", "runtime/engine", "runtime/admin", "runtime/metrics"} {
		path := "github.com/belfry/belfry/" + pkg
		out, err := exec.Command("go", "list", "-deps", path).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", path, err, out)
		}
		deps := strings.Fields(string(out))
		if !slices.Contains(deps, "github.com/belfry/belfry/runtime/engine") {
			t.Fatalf("go list -deps %s does not list package engine: %q", path, out)
		}
		for _, dep := range deps {
			for _, bad := range engineDrivers {
				if strings.HasPrefix(dep, bad) {
					t.Errorf("%s links %s: the core talks to package engine; an engine's mechanics go in its own package", pkg, dep)
				}
			}
		}
	}
}

// TestCoreHoldsTheCoreFiles fails when one of the files the core is made
// of leaves it: moved to an engine's side, which is a step back.
func TestCoreHoldsTheCoreFiles(t *testing.T) {
	t.Parallel()
	for _, want := range []string{"scheduler.go", "familyloop.go", "leaderloop.go", "family.go", "familychange.go",
		"plan.go", "ledger.go", "status.go", "operate.go", "handover.go", "health.go", "bounded.go",
		"leadership.go", "observe.go", "state.go", "options.go", "runtime.go", "unacked.go", "queues.go"} {
		if _, err := os.Stat(want); err != nil {
			t.Errorf("%s is not among the core's files: %v", want, err)
		}
	}
}
