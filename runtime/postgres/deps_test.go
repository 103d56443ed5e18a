package postgres_test

import (
	"os/exec"
	"strings"
	"testing"
)

// A service links only the engine it uses: the core runtime links neither
// pgx nor River, the Postgres engine links neither asynq nor go-redis, and
// the engine contract (package engine) links no driver at all.
func TestEnginesDoNotLinkEachOther(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		pkg       string
		forbidden []string
	}{
		{"github.com/belfry/belfry/runtime", []string{"github.com/jackc/pgx", "github.com/riverqueue/"}},
		{"github.com/belfry/belfry/runtime/postgres", []string{"github.com/hibiken/asynq", "github.com/redis/go-redis"}},
		{"github.com/belfry/belfry/runtime/engine", []string{"github.com/hibiken/asynq", "github.com/redis/go-redis",
			"github.com/jackc/pgx", "github.com/riverqueue/"}},
	} {
		out, err := exec.Command("go", "list", "-deps", tc.pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", tc.pkg, err, out)
		}
		deps := strings.Fields(string(out))
		if len(deps) < 5 {
			t.Fatalf("go list -deps %s listed %d packages: %q", tc.pkg, len(deps), out)
		}
		for _, dep := range deps {
			for _, f := range tc.forbidden {
				if strings.HasPrefix(dep, f) {
					t.Errorf("%s links %s", tc.pkg, dep)
				}
			}
		}
	}
}
