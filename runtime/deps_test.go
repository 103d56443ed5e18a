package runtime_test

import (
	"os/exec"
	"strings"
	"testing"
)

// A service that imports runtime alone must not link the admin, the
// metrics package or Prometheus. (html/template is linked by asynq itself,
// through spf13/cast, whatever belfry does; no belfry package imports it
// outside runtime/admin.)
func TestRuntimeAloneLinksNeitherAdminNorPrometheus(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}} {{join .Imports " "}}`, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for line := range strings.Lines(string(out)) {
		pkg, imports, _ := strings.Cut(strings.TrimSpace(line), " ")
		if strings.Contains(pkg, "prometheus") || strings.HasSuffix(pkg, "/runtime/admin") || strings.HasSuffix(pkg, "/runtime/metrics") {
			t.Errorf("runtime links %s", pkg)
		}
		if strings.HasPrefix(pkg, "github.com/belfry/belfry/") && strings.Contains(" "+imports+" ", " html/template ") {
			t.Errorf("%s imports html/template", pkg)
		}
	}
}

// Tracing is opt-in: a service that imports the runtime, its admin or its
// metrics, and not runtime/otelbelfry, links no OpenTelemetry package.
func TestOnlyOtelbelfryLinksOpenTelemetry(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps",
		"github.com/belfry/belfry/runtime", "github.com/belfry/belfry/runtime/admin", "github.com/belfry/belfry/runtime/metrics").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for line := range strings.Lines(string(out)) {
		if pkg := strings.TrimSpace(line); strings.HasPrefix(pkg, "go.opentelemetry.io/") {
			t.Errorf("runtime, admin or metrics links %s", pkg)
		}
	}
}
