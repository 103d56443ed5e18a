package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// e2eMain prints each schedule's next fire time from a fixed instant, then
// delivers one occurrence of each schedule through an asynq mux and a
// recording middleware, as the runtime's RegisterHandlers and an asynq
// server would.
const e2eMain = `package main

import (
	"context"
	"fmt"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/hibiken/asynq"

	"example.com/e2e/clash"
	"example.com/e2e/jobs"
	"example.com/e2e/methods"
)

func main() {
	from := time.Date(2026, 3, 7, 12, 0, 0, 0, time.UTC)
	for _, s := range jobs.Registry.Schedules() {
		fmt.Println(s.Name, s.Next(from).Format(time.RFC3339), s.Source)
	}
	record := func(s *registry.Schedule, next registry.HandlerFunc) registry.HandlerFunc {
		return func(ctx context.Context, occ registry.Occurrence) error {
			fmt.Println("run", s.Name, "on queue", s.Queue)
			return next(ctx, occ)
		}
	}
	mux := asynq.NewServeMux()
	for _, s := range jobs.Registry.Schedules() {
		mux.HandleFunc(s.Name, func(ctx context.Context, t *asynq.Task) error {
			return s.HandlePayload(ctx, t.Payload(), record)
		})
	}
	for _, s := range jobs.Registry.Schedules() {
		task := asynq.NewTask(s.Name, registry.EncodeOccurrence(s.Occurrence("", s.Next(from))))
		if err := mux.ProcessTask(context.Background(), task); err != nil {
			fmt.Println("error:", err)
		}
	}
	fmt.Println(jobs.TaskPruneSoftDeleted, jobs.TaskSendDigest)
	for _, s := range clash.Registry.Schedules() {
		fmt.Println(s.Name, s.Next(from).Format(time.RFC3339))
	}

	// Method handlers run on the receivers given to NewRegistry.
	bound := methods.NewRegistry(&methods.Jobs{DB: &methods.Store{Name: "main-db"}}, methods.Mailer{From: "ops@example.com"})
	for _, s := range bound.Schedules() {
		occ := s.Occurrence("", s.Next(from))
		if err := s.HandlePayload(context.Background(), registry.EncodeOccurrence(occ)); err != nil {
			fmt.Println("error:", err)
		}
	}
	merged, err := registry.Merge(jobs.Registry, clash.Registry)
	fmt.Println("merged", merged.Len(), err)
	_, err = registry.Merge(jobs.Registry, bound)
	fmt.Println(err)
}
`

// TestEndToEnd generates into a temporary module over a stale, broken
// generated file, checks the output matches the golden files wherever the
// packages live, then builds and runs a program that uses both registries,
// which also proves the golden files compile.
func TestEndToEnd(t *testing.T) {
	t.Parallel()
	mod := tempModule(t, "jobs", "clash", "methods")
	writeFile(t, filepath.Join(mod, "cmd", "e2e", "main.go"), e2eMain)
	// A stale file from an older version: it imports a package that does not
	// exist and redeclares a handler. Loading must not trip over it.
	writeFile(t, filepath.Join(mod, "jobs", outputName), header+"\n\npackage jobs\n\nimport \"example.com/gone\"\n\nfunc PruneSoftDeleted() { gone.X() }\n")
	// A package whose last directive was deleted keeps no generated file.
	writeFile(t, filepath.Join(mod, "retired", "retired.go"), "package retired\n\n// Old had a schedule once.\nfunc Old() {}\n")
	writeFile(t, filepath.Join(mod, "retired", outputName), header+"\n\npackage retired\n\nvar Registry = 1\n")

	var stdout, stderr bytes.Buffer
	a := &app{dir: mod, env: moduleEnv(), stdout: &stdout, stderr: &stderr}
	if code := a.run([]string{"generate", "./..."}); code != 0 {
		t.Fatalf("crongen generate ./...: exit status %d\n%s", code, stderr.String())
	}
	if stdout.Len()+stderr.Len() > 0 {
		t.Errorf("a successful run printed:\n%s%s", stdout.String(), stderr.String())
	}
	for _, pkg := range []string{"jobs", "clash", "methods"} {
		got := readFile(t, filepath.Join(mod, pkg, outputName))
		// The file names its package's import path, and nothing else of
		// where the package is.
		want := strings.ReplaceAll(readFile(t, filepath.Join(fixture(t, pkg), outputName+".golden")),
			`"github.com/belfry/belfry/testdata/crongen/`+pkg+`"`, `"example.com/e2e/`+pkg+`"`)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: generated file differs from the in-place golden (-want +got):\n%s", pkg, diff)
		}
	}
	if _, err := os.Stat(filepath.Join(mod, "retired", outputName)); !os.IsNotExist(err) {
		t.Errorf("retired/%s was not removed (stat: %v)", outputName, err)
	}
	if _, err := os.Stat(filepath.Join(mod, "cmd", "e2e", outputName)); !os.IsNotExist(err) {
		t.Errorf("a package without schedules got a %s (stat: %v)", outputName, err)
	}

	bin := filepath.Join(t.TempDir(), "e2e")
	build := exec.Command("go", "build", "-o", bin, "./cmd/e2e")
	build.Dir, build.Env = mod, moduleEnv()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).CombinedOutput()
	if err != nil {
		t.Fatalf("running the generated registry: %v\n%s", err, out)
	}
	// Slots: 2026-03-07T12:00:00Z is 1772884800.
	const wantOut = `heartbeat 2026-03-07T12:01:30Z reports.go:28
jobs.probe-status 2026-03-07T12:10:00Z digest.go:31
jobs.rollup-hourly 2026-03-07T13:00:00Z reports.go:12
prune-soft-deleted 2026-03-08T03:17:00Z prune.go:13
reconcile-ledger 2026-03-08T03:00:00-04:00 reports.go:20
send-digest 2026-03-09T08:00:00+01:00 digest.go:20
weekly-report 2026-03-09T09:00:00Z reports.go:37
run heartbeat on queue default
heartbeat cron:heartbeat:1772884890
run jobs.probe-status on queue default
probe https://status.example.com cron:jobs.probe-status:1772885400
run jobs.rollup-hourly on queue default
rollup cron:jobs.rollup-hourly:1772888400
run prune-soft-deleted on queue maintenance
prune cron:prune-soft-deleted:1772939820
run reconcile-ledger on queue ledger
reconcile cron:reconcile-ledger:1772953200
run send-digest on queue default
digest team@example.com cron:send-digest:1773039600
run weekly-report on queue default
weekly report  cron:weekly-report:1773046800
prune-soft-deleted send-digest
clash.count 2026-03-08T00:00:00Z
clash.limit 2026-03-08T01:00:00Z
heartbeat cron:heartbeat:1772884890 unused
prune main-db cron:maintenance:prune:1772939820
count main-db cron:methods.count:1772946000
vacuum main-db 10 cron:methods.vacuum:1772942400
digest from ops@example.com cron:reports:weekly:1773039600
merged 9 <nil>
schedule name "heartbeat" is in registries 1 and 2 (declared at reports.go:28 and methods.go:68); names must be unique across the service, set name= on one
`
	if diff := cmp.Diff(wantOut, string(out)); diff != "" {
		t.Errorf("program output mismatch (-want +got):\n%s", diff)
	}
}
