package main

import (
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/belfry/belfry/internal/pgtest"
)

// TestTwoReplicasOnPostgres runs TestTwoReplicas' checks with the service
// on Postgres and River: one leader, every heartbeat slot run exactly
// once, a manual trigger that runs once, a graceful handover, and the same
// admin API and metrics. The replicas migrate the fresh database
// themselves (-migrate), both at once.
func TestTwoReplicasOnPostgres(t *testing.T) {
	t.Parallel()
	checkTwoReplicas(t, "", "-postgres", pgtest.NewDatabase(t, "belfry_service_test"), "-migrate")
}

// Without -migrate the service does not create its tables: on a database
// that was never migrated it exits with one line naming the command to
// run.
func TestPostgresWithoutMigrationsNamesTheCommand(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(serviceBinary(t), "-http", "127.0.0.1:0", "-postgres", pgtest.NewDatabase(t, "belfry_service_test"))
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("err %v, want exit status 1; output:\n%s", err, out)
	}
	if lines := strings.Count(string(out), "\n"); lines != 1 || !strings.Contains(string(out), "run belfry migrate --postgres URL") {
		t.Errorf("output %q: want one line naming belfry migrate --postgres URL", out)
	}
}
