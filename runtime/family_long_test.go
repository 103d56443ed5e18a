package runtime_test

import (
	"context"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/belfry/belfry/internal/redistest"
	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
	"github.com/hibiken/asynq"
)

var longFlag = flag.Bool("long", false, "run the long tests (make test/long)")

// longTest skips a test unless -long is given: one that lives in make
// test/long because its fault takes real time to stage and to recover
// from (a Sentinel failover, a slow link's handover, a lease left to
// expire mid-spike). make test keeps a faster test of each guarantee
// (docs/testing.md lists them).
func longTest(t *testing.T) {
	t.Helper()
	if !*longFlag {
		t.Skip("a long test: make test/long (go test -long)")
	}
}

// Every test that calls longTest is named in the Makefile's test/long, or
// no target would ever run it.
func TestEveryLongTestIsInMakeTestLong(t *testing.T) {
	makefile, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	long := regexp.MustCompile(`(?m)^func (Test\w+)\(t \*testing\.T\) \{\n\tlongTest\(t\)$`)
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	var found int
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range long.FindAllStringSubmatch(string(src), -1) {
			found++
			if !regexp.MustCompile(`\b` + m[1] + `\b`).Match(makefile) {
				t.Errorf("%s (%s) calls longTest but the Makefile's test/long does not name it", m[1], f)
			}
		}
	}
	if found == 0 {
		t.Error("no test calls longTest: the pattern no longer matches how they do")
	}
}

// The families' whole promise at the size it was asked for: one family,
// 100,000 members written through the API across 300 zones, and every
// member's Monday 09:00 in its own zone run exactly once, by real asynq
// workers, on a private Redis. The clock jumps to each distinct instant
// at which some zone's 09:00 falls (a few dozen), a few seconds early,
// and the test waits for that instant's members to have run before the
// next. A few minutes on two cores: make test/long.
func TestFamilyOfAHundredThousandMembersRunsEachOnceAtItsLocalTime(t *testing.T) {
	longTest(t)
	const members, zoneCount = 100_000, 300
	zones := hostZones(t, zoneCount)
	monday := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC) // before any zone's Monday 09:00: UTC+14's is Sunday 19:00 UTC
	clk := newJumpClock(monday.Add(-36 * time.Hour))
	rdb := redistest.StartPrivate(t).Client(t)
	ns, queue := uniq("fam100k"), uniq("q")
	var mu sync.Mutex
	ran := make(map[string][]time.Time, members) // member -> slots run
	reg := registry.MustNew(registry.Schedule{Name: family, Expr: "0 9 * * MON", Zone: "UTC", Per: "tenant", Queue: queue,
		Grace: time.Minute, Handler: func(_ context.Context, occ registry.Occurrence) error {
			mu.Lock()
			defer mu.Unlock()
			ran[occ.Member] = append(ran[occ.Member], occ.Slot)
			return nil
		}})
	rt, err := runtime.NewWithClock(reg, runtime.Options{Redis: rdb, Namespace: ns, LeaseTTL: 2 * time.Second,
		SkewMargin: 365 * 24 * time.Hour, Logger: testLogger(t)}, clk)
	if err != nil {
		t.Fatal(err)
	}
	runUntilTheEnd(t, rt)
	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{Queues: map[string]int{queue: 1}, Concurrency: 64,
		TaskCheckInterval: 20 * time.Millisecond, ShutdownTimeout: 5 * time.Second, Logger: quietAsynq{}, LogLevel: asynq.FatalLevel})
	mux := asynq.NewServeMux()
	rt.RegisterHandlers(mux)
	if err := srv.Start(mux); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	waitFor(t, 10*time.Second, "the replica to lead", rt.Leadership().Leading)

	// Written in bulk, as a service importing its tenants would; each
	// member's Monday 09:00 in its zone is the slot it must run once.
	want := make(map[string]time.Time, members)
	byInstant := map[time.Time][]string{}
	ms := make([]runtime.Member, members)
	for i := range ms {
		zone := zones[i%len(zones)]
		ms[i] = runtime.Member{Key: fmt.Sprintf("tenant-%06d", i), Zone: zone}
		loc, err := registry.LoadZone(zone)
		if err != nil {
			t.Fatal(err)
		}
		slot := time.Date(2026, 3, 2, 9, 0, 0, 0, loc)
		want[ms[i].Key] = slot
		byInstant[slot.UTC()] = append(byInstant[slot.UTC()], ms[i].Key)
	}
	start := time.Now()
	for lo := 0; lo < len(ms); lo += 10_000 {
		if err := rt.Families().SetMany(context.Background(), family, ms[lo:min(lo+10_000, len(ms))]); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d members in %d zones written in %s", members, len(zones), time.Since(start).Round(time.Millisecond))
	if n, err := rt.Families().Count(context.Background(), family); err != nil || n != members {
		t.Fatalf("MemberCount = %d, %v; want %d", n, err, members)
	}
	instants := make([]time.Time, 0, len(byInstant))
	for at := range byInstant {
		instants = append(instants, at)
	}
	slices.SortFunc(instants, func(a, b time.Time) int { return a.Compare(b) })
	runsOf := func(keys []string) (once, more int) {
		mu.Lock()
		defer mu.Unlock()
		for _, k := range keys {
			switch n := len(ran[k]); {
			case n == 1:
				once++
			case n > 1:
				more++
			}
		}
		return once, more
	}
	var slowest time.Duration
	for _, at := range instants {
		keys := byInstant[at]
		clk.jumpTo(at.Add(-3 * time.Second))
		waitFor(t, 3*time.Second+2*time.Minute, fmt.Sprintf("the %d members due at %s to run", len(keys), at.Format(time.RFC3339)), func() bool {
			once, more := runsOf(keys)
			return once+more == len(keys)
		})
		if d := clk.Now().Sub(at); d > slowest {
			slowest = d
		}
	}
	t.Logf("%d instants; the slowest group ran in full %s after its slot (its members run by 64 workers)", len(instants), slowest.Round(time.Millisecond))
	// Nothing runs again: a few more seconds of the leader's life past the last slot.
	clk.jumpTo(instants[len(instants)-1].Add(time.Hour))
	time.Sleep(3 * time.Second)
	mu.Lock()
	defer mu.Unlock()
	wrong := 0
	for key, slot := range want {
		if got := ran[key]; len(got) != 1 || !got[0].Equal(slot) || got[0].Location().String() != slot.Location().String() {
			if wrong++; wrong <= 5 {
				t.Errorf("%s ran %v; want once, at %s", key, got, slot)
			}
		}
	}
	if wrong > 0 {
		t.Errorf("%d of %d members did not run exactly once at their local Monday 09:00", wrong, members)
	}
}

// hostZones lists n IANA zones of this host's zoneinfo, in order.
func hostZones(t *testing.T, n int) []string {
	t.Helper()
	root := "/usr/share/zoneinfo"
	var zones []string
	filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		name, _ := filepath.Rel(root, path)
		first, _, nested := strings.Cut(name, "/")
		if !nested || strings.Contains(name, ".") || first == "posix" || first == "right" || first == "Etc" {
			return nil
		}
		if _, err := registry.LoadZone(name); err == nil {
			zones = append(zones, name)
		}
		return nil
	})
	slices.Sort(zones)
	if len(zones) < n {
		t.Fatalf("%s has %d zones; want %d", root, len(zones), n)
	}
	return zones[:n]
}
