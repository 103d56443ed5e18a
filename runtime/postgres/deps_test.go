package postgres_test

import (
	"os/exec"
	"strings"
	"testing"
)

// A service links only the engine it uses: the core runtime links neither
// pgx nor River, and the Postgres engine links neither asynq nor go-redis.
func TestEnginesDoNotLinkEachOther(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		pkg       string
		forbidden []string
	}{
		{"github.com/belfry/belfry/runtime", []string{"github.com/jackc/pgx", "github.com/riverqueue/"}},
		{"github.com/belfry/belfry/runtime/postgres", []string{"github.com/hibiken/asynq", "github.com/redis/go-redis"}},
	} {
		out, err := exec.Command("go", "list", "-deps", tc.pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", tc.pkg, err, out)
		}
		deps := strings.Fields(string(out))
		if len(deps) < 10 {
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
