package enginetest_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The suite is written against the runtime's public API: it imports no
// engine's client or queue and none of the runtime's internals, so that
// what it checks holds for every engine alike.
func TestTheSuiteNamesNoEngine(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	allowed := map[string]bool{"github.com/belfry/belfry/registry": true, "github.com/belfry/belfry/runtime/core": true,
		"github.com/belfry/belfry/internal/testlog": true} // a test's logger: no engine
	for imp := range strings.Lines(string(out)) {
		imp = strings.TrimSpace(imp)
		if strings.Contains(imp, ".") && !allowed[imp] {
			t.Errorf("the suite imports %s", imp)
		}
	}
}
