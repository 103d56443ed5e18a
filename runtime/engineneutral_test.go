package runtime_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// redisFiles are the runtime's files that are Redis mechanics and may
// reach the Redis engine's parts (Runtime.redis) and its drivers, each
// with why. Every other file is the core, which talks to package engine.
var redisFiles = map[string]string{
	"redisengine.go":      "builds the Redis engine from Options.Redis, RedisURL or RedisEngine",
	"workers.go":          "asynq worker wiring: handlers on an asynq ServeMux, asynq servers and retries",
	"redisdiagnostics.go": "RedisDiagnostics, the Redis engine's own states",
	"asynqlog.go":         "asynq's logger, to the runtime's",
}

// coreMayImport maps a core file to the driver it may import, and why.
var coreMayImport = map[string]map[string]string{
	"options.go": {"github.com/redis/go-redis/v9": "Options.Redis, the Redis user's contract, is a go-redis client"},
}

// forbiddenInCore are the imports that make a file Redis mechanics.
var forbiddenInCore = []string{
	"github.com/redis/go-redis/",
	"github.com/hibiken/asynq",
	"github.com/belfry/belfry/runtime/internal/store",
	"github.com/belfry/belfry/runtime/internal/lease",
	"github.com/belfry/belfry/runtime/internal/pipeline",
	"github.com/belfry/belfry/runtime/internal/redisengine",
}

// TestCoreFilesAreEngineNeutral fails when a core file imports go-redis,
// asynq or the Redis engine's internals, or reaches the Redis engine's
// parts (r.redis) instead of the engine: the core must run on any engine.
func TestCoreFilesAreEngineNeutral(t *testing.T) {
	t.Parallel()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var core []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		if _, ok := redisFiles[name]; ok {
			continue
		}
		core = append(core, name)
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if _, ok := coreMayImport[name][path]; ok {
				continue
			}
			for _, bad := range forbiddenInCore {
				if strings.HasPrefix(path, bad) {
					t.Errorf("%s imports %s: the core talks to package engine; Redis mechanics go in one of the Redis files (redisFiles)", name, path)
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok && (sel.Sel.Name == "redis" || sel.Sel.Name == "redisParts") {
				t.Errorf("%s: %s reaches the Redis engine's parts; call the engine (Runtime.eng)", fset.Position(sel.Pos()), sel.Sel.Name)
			}
			return true
		})
	}
	// The files the core is made of today; one removed from the list
	// means it moved to the Redis side, which is a step back.
	for _, want := range []string{"scheduler.go", "familyloop.go", "leaderloop.go", "family.go", "familychange.go",
		"plan.go", "ledger.go", "status.go", "operate.go", "handover.go", "health.go", "bounded.go",
		"leadership.go", "observe.go", "state.go", "options.go", "runtime.go", "unacked.go"} {
		if !slices.Contains(core, want) {
			t.Errorf("%s is not among the core files %v", want, core)
		}
	}
}
