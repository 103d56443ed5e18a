package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/belfry/belfry/internal/scripttest"
	"github.com/rogpeppe/go-internal/testscript"
)

// TestScript runs the CLI scripts in testdata/script. Each script's work
// directory is a module example.com/e2e using this checkout of belfry, so
// that generate and list can load the packages a script writes.
func TestScript(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	// testscript runs commands with HOME unset; the go command needs its
	// caches spelled out to find the module and build caches.
	out, err := exec.Command("go", "env", "GOCACHE", "GOMODCACHE", "GOPATH").Output()
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	goenv := strings.Fields(string(out))
	if len(goenv) != 3 {
		t.Fatalf("go env printed %q, want three paths", out)
	}
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("testdata", "script"),
		RequireExplicitExec: true,
		UpdateScripts:       *update,
		Setup: func(env *testscript.Env) error {
			for k, v := range map[string]string{
				"GOCACHE": goenv[0], "GOMODCACHE": goenv[1], "GOPATH": goenv[2],
				"GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local", "GOWORK": "off",
			} {
				env.Setenv(k, v)
			}
			if err := os.WriteFile(filepath.Join(env.WorkDir, "go.mod"), []byte(goModule(root)), 0o666); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(env.WorkDir, "go.sum"), sum, 0o666)
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exitcode": scripttest.ExitCode,
		},
	})
}
