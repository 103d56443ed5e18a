package admin

import (
	"strings"
	"testing"
	"time"

	"github.com/belfry/belfry/runtime"
)

// Two services on one Redis that get in each other's way are said above
// the table, each with what to do.
func TestNamespaceWarnings(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	misrouted := runtime.Misrouted{Schedule: "prune", Queue: "default", Namespace: "other.jobs-1a2b3c4d", Replica: "other-1",
		Reason: "have no handler for it (asynq: handler not found)", At: now}
	snap := runtime.Snapshot{At: now,
		NamespaceContention: `namespace "shared" is used by registry example.com/a/jobs and by example.com/b/jobs (replicas b-1)`,
		LegacyNamespace:     `a live leader in the old default namespace "belfry" schedules 1 of this registry's schedules (prune)`,
		Misrouted:           []runtime.Misrouted{misrouted}}
	got := strings.Join(warnings(snap, nil), "\n")
	for _, want := range []string{
		"Another service shares this namespace: " + snap.NamespaceContention + ".",
		"An earlier deployment still schedules these jobs: " + snap.LegacyNamespace + ".",
		"Workers bounce this service's occurrences: " + misrouted.String() + ".",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("warnings lack %q:\n%s", want, got)
		}
	}
}

// The misrouted reports that could not be read are named on the page like
// every other part a snapshot reads.
func TestMissingMisroutedReportsAreNamed(t *testing.T) {
	t.Parallel()
	got := missingNotice([]runtime.Missing{{Part: runtime.PartMisrouted, Reason: "Redis slow: no answer within 0.8 s"}})
	if want := "Redis slow: no answer within 0.8 s. Not shown: occurrences bounced by workers."; got != want {
		t.Errorf("notice %q, want %q", got, want)
	}
}
