package registry

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"
)

func nopHandler(context.Context, Occurrence) error { return nil }

// TestNewAndDirectiveAgree checks that a value the directive refuses is
// refused by New in the same words, and one it accepts is accepted: both go
// through the same check of each field.
func TestNewAndDirectiveAgree(t *testing.T) {
	t.Parallel()
	tests := []struct {
		key, value string
		set        func(s *Schedule)
	}{
		{"name", "-prune", func(s *Schedule) { s.Name = "-prune" }},
		{"name", "reports::weekly", func(s *Schedule) { s.Name = "reports::weekly" }},
		{"name", "reports:manual", func(s *Schedule) { s.Name = "reports:manual" }},
		{"name", "reports:weekly", func(s *Schedule) { s.Name = "reports:weekly" }},
		{"queue", "mail:out", func(s *Schedule) { s.Queue = "mail:out" }},
		{"queue", "mail", func(s *Schedule) { s.Queue = "mail" }},
		{"timeout", "500ms", func(s *Schedule) { s.Timeout = 500 * time.Millisecond }},
		{"grace", "1m", func(s *Schedule) { s.Grace = time.Minute }},
		{"retry", "1001", func(s *Schedule) { s.MaxRetry = 1001 }},
		{"retry", "-1", func(s *Schedule) { s.MaxRetry = -1 }},
		{"overlap", "never", func(s *Schedule) { s.Overlap = "never" }},
		{"misfire", "all", func(s *Schedule) { s.Misfire = "all" }},
		{"tz", "Mars/Olympus", func(s *Schedule) { s.Zone = "Mars/Olympus" }},
	}
	for _, tt := range tests {
		_, c := parseDirectiveLine(t, `//cron:schedule "17 3 * * *" `+tt.key+"="+tt.value)
		_, dirErr := ParseDirective(c)
		s := Schedule{Name: "jobs.prune", Expr: "17 3 * * *", Handler: nopHandler}
		tt.set(&s)
		_, newErr := New(s)
		if (dirErr == nil) != (newErr == nil) {
			t.Errorf("%s=%s: directive error %v, New error %v; want both or neither", tt.key, tt.value, dirErr, newErr)
			continue
		}
		if dirErr == nil {
			continue
		}
		// The directive says `bad value "v" for key: <why>`, New
		// `schedule ...: key v: <why>`; the why is the same.
		_, why, _ := strings.Cut(dirErr.Error(), "for "+tt.key+": ")
		if why == "" || !strings.HasSuffix(newErr.Error(), why) {
			t.Errorf("%s=%s: directive says %q, New says %q; want the same reason", tt.key, tt.value, dirErr, newErr)
		}
	}
}

func TestCheckNameAllowsCategoryAction(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"reports:weekly", "billing:invoice:send", "jobs.prune-soft-deleted", "a", "manually:sent"} {
		if err := CheckName(name); err != nil {
			t.Errorf("CheckName(%q) = %v, want nil", name, err)
		}
	}
	for _, name := range []string{"", ":reports", "reports:", "a::b", "manual", "a:manual", "a:rerun:b", "member:x", "a b", "prüfen", strings.Repeat("a", 101)} {
		if err := CheckName(name); err == nil {
			t.Errorf("CheckName(%q) = nil, want an error", name)
		}
	}
}

// TestLoadZoneLoadsEachZoneOnce checks that every caller shares one
// *time.Location per zone name: time.LoadLocation alone returns a fresh
// copy of the zone's data each time.
func TestLoadZoneLoadsEachZoneOnce(t *testing.T) {
	t.Parallel()
	a, err := LoadZone("Pacific/Chatham")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := LoadZone("Pacific/Chatham")
	if a != b {
		t.Errorf("LoadZone returned two copies of Pacific/Chatham (%p, %p), want one", a, b)
	}
	r, err := New(
		Schedule{Name: "a", Expr: "0 3 * * *", Zone: "Pacific/Chatham", Handler: nopHandler},
		Schedule{Name: "b", Expr: "0 4 * * *", Zone: "Pacific/Chatham", Handler: nopHandler},
	)
	if err != nil {
		t.Fatal(err)
	}
	if x, y := r.Schedules()[0].Location(), r.Schedules()[1].Location(); x != a || y != a {
		t.Errorf("schedules in one zone hold locations %p and %p, want the shared %p", x, y, a)
	}
	if _, err := LoadZone("Nowhere/Special"); err == nil {
		t.Error("LoadZone(Nowhere/Special) succeeded")
	}
}

// TestNewSharesIdenticalParses checks that schedules giving the same
// expression in the same zone with the same phase share one parse, and
// that those whose parse differs do not: another zone, another phase, or H
// fields, whose values come from each schedule's name.
func TestNewSharesIdenticalParses(t *testing.T) {
	t.Parallel()
	r, err := New(
		Schedule{Name: "a", Expr: "0 3 * * *", Zone: "Europe/Berlin", Handler: nopHandler},
		Schedule{Name: "b", Expr: "0 3 * * *", Zone: "Europe/Berlin", Handler: nopHandler},
		Schedule{Name: "c", Expr: "0 3 * * *", Zone: "Asia/Tokyo", Handler: nopHandler},
		Schedule{Name: "d", Expr: "H H * * *", Handler: nopHandler},
		Schedule{Name: "e", Expr: "H H * * *", Handler: nopHandler},
		Schedule{Name: "f", Expr: "@every 1h", Phase: 17 * time.Minute, Handler: nopHandler},
		Schedule{Name: "g", Expr: "@every 1h", Phase: 17 * time.Minute, Handler: nopHandler},
		Schedule{Name: "h", Expr: "@every 1h", Handler: nopHandler},
	)
	if err != nil {
		t.Fatal(err)
	}
	cron := func(name string) *Cron {
		s, ok := r.Lookup(name)
		if !ok {
			t.Fatalf("Lookup(%q) found nothing", name)
		}
		return s.Cron()
	}
	for _, tt := range []struct {
		a, b  string
		share bool
	}{{"a", "b", true}, {"a", "c", false}, {"d", "e", false}, {"f", "g", true}, {"f", "h", false}} {
		if got := cron(tt.a) == cron(tt.b); got != tt.share {
			t.Errorf("%s and %s share a parse: %v, want %v", tt.a, tt.b, got, tt.share)
		}
	}
	from := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for _, name := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		s, _ := r.Lookup(name)
		want := MustParseCron(s.Expr, s.Location(), WithName(name), WithPhase(s.Phase)).Next(from)
		if got := s.Next(from); !got.Equal(want) {
			t.Errorf("%s: Next(%s) = %s, its own parse says %s", name, from, got, want)
		}
	}
	if _, ok := r.Lookup("zz"); ok {
		t.Error(`Lookup("zz") found a schedule`)
	}
}

// zonedSchedules returns n schedules spread over a few zones, as a large
// service declares them.
func zonedSchedules(n int) []Schedule {
	zones := []string{"America/New_York", "Europe/Berlin", "Asia/Tokyo", "Australia/Lord_Howe"}
	s := make([]Schedule, n)
	for i := range s {
		s[i] = Schedule{
			Name: fmt.Sprintf("tenant-%06d:report", i), Expr: fmt.Sprintf("%d %d * * *", i%60, i%24),
			Zone: zones[i%len(zones)], Handler: nopHandler,
		}
	}
	return s
}

// residentKB returns the process's resident set (VmRSS) in kB, or 0 where
// /proc is not available.
func residentKB() int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			return kb
		}
	}
	return 0
}

// heapInUse returns the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestMemoryPerZonedSchedule measures the heap a registry of 100,000 zoned
// schedules holds, per schedule. Before zones were cached, each schedule
// held its own copy of its zone's data.
func TestMemoryPerZonedSchedule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 100,000 schedules")
	}
	const n = 100_000
	const budget = 512 // bytes per schedule
	schedules := zonedSchedules(n)
	before, rssBefore := heapInUse(), residentKB()
	r, err := New(schedules...)
	if err != nil {
		t.Fatal(err)
	}
	perSchedule := float64(heapInUse()-before) / n
	debug.FreeOSMemory() // what the process keeps, not the garbage of building it
	rssPerSchedule := float64(residentKB()-rssBefore) * 1024 / n
	runtime.KeepAlive(r)
	runtime.KeepAlive(schedules) // the input is not the registry's cost
	// The resident set moves with the runtime's page handling, so only the
	// live heap is held to the budget.
	t.Logf("registry of %d zoned schedules: %.0f bytes/schedule of live heap, %.0f bytes/schedule of resident set", n, perSchedule, rssPerSchedule)
	if perSchedule > budget {
		t.Errorf("%.0f bytes per zoned schedule, want at most %d", perSchedule, budget)
	}
}

// BenchmarkNewZoned reports the heap held per zoned schedule
// (bytes/schedule) alongside the time to build the registry.
func BenchmarkNewZoned(b *testing.B) {
	const n = 100_000
	schedules := zonedSchedules(n)
	var perSchedule float64
	for b.Loop() {
		before := heapInUse()
		r, err := New(schedules...)
		if err != nil {
			b.Fatal(err)
		}
		perSchedule = float64(heapInUse()-before) / n
		runtime.KeepAlive(r)
	}
	b.ReportMetric(perSchedule, "bytes/schedule")
}

func TestMerge(t *testing.T) {
	t.Parallel()
	jobs := MustNew(
		Schedule{Name: "prune", Expr: "17 3 * * *", Handler: nopHandler, Source: "jobs/prune.go:12"},
		Schedule{Name: "reports:weekly", Expr: "0 8 * * MON", Zone: "Europe/Berlin", Handler: nopHandler},
	)
	billing := MustNew(Schedule{Name: "billing:invoice", Expr: "0 2 1 * *", Handler: nopHandler})
	merged, err := Merge(jobs, billing)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range merged.Schedules() {
		names = append(names, s.Name)
	}
	if got, want := strings.Join(names, " "), "billing:invoice prune reports:weekly"; got != want {
		t.Errorf("merged schedules %q, want %q (sorted)", got, want)
	}
	if s, ok := merged.Lookup("reports:weekly"); !ok || s.Location().String() != "Europe/Berlin" || s.Next(time.Time{}).IsZero() {
		t.Errorf("Lookup(reports:weekly) = %+v, %v; want the parsed Berlin schedule", s, ok)
	}
	// The merged registry holds copies: the sources are unchanged.
	if jobs.Len() != 2 || billing.Len() != 1 {
		t.Errorf("Merge changed its arguments: %d and %d schedules", jobs.Len(), billing.Len())
	}

	other := MustNew(Schedule{Name: "prune", Expr: "0 4 * * *", Handler: nopHandler, Source: "ops/cleanup.go:30"})
	_, err = Merge(jobs, billing, other)
	if err == nil {
		t.Fatal("Merge accepted the name prune twice")
	}
	for _, want := range []string{`"prune"`, "registries 1 and 3", "jobs/prune.go:12", "ops/cleanup.go:30"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Merge error %q does not contain %q", err, want)
		}
	}
}

// TestRegistryPackages checks that a registry lists its packages in the
// order given, each once, so that a merged registry is named after its
// first package whatever the schedules' names.
func TestRegistryPackages(t *testing.T) {
	t.Parallel()
	jobs := MustNew(
		Schedule{Name: "z-last", Expr: "@hourly", Handler: nopHandler, Package: "example.com/svc/jobs"},
		Schedule{Name: "a-first", Expr: "@daily", Handler: nopHandler, Package: "example.com/svc/jobs"},
	)
	billing := MustNew(Schedule{Name: "billing", Expr: "@daily", Handler: nopHandler, Package: "example.com/billing"})
	bare := MustNew(Schedule{Name: "bare", Expr: "@daily", Handler: nopHandler})
	merged, err := Merge(jobs, bare, billing)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(merged.Packages(), " "), "example.com/svc/jobs example.com/billing"; got != want {
		t.Errorf("Packages() = %q, want %q", got, want)
	}
	if got := bare.Packages(); len(got) != 0 {
		t.Errorf("a registry of schedules without Package has packages %q", got)
	}
}

func TestDirectiveScheduleDefaultName(t *testing.T) {
	t.Parallel()
	_, c := parseDirectiveLine(t, `//cron:schedule "17 3 * * *" tz=Asia/Tokyo`)
	d, err := ParseDirective(c)
	if err != nil {
		t.Fatal(err)
	}
	s := d.Schedule("jobs.prune")
	s.Handler = nopHandler
	if _, err := New(s); err != nil || s.Name != "jobs.prune" {
		t.Errorf("Schedule(jobs.prune) = %+v, New: %v", s, err)
	}
}

func TestFormatDuration(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{{30 * time.Minute, "30m"}, {time.Hour, "1h"}, {90 * time.Minute, "1h30m"}, {2 * time.Second, "2s"}, {1500 * time.Millisecond, "1.5s"}, {time.Hour + time.Second, "1h0m1s"}} {
		if got := FormatDuration(tt.d); got != tt.want {
			t.Errorf("FormatDuration(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}
