package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/belfry/belfry/runtime/internal/store"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/belfry/belfry/internal/redistest"
	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// memberRuns records every handler run of a family by (member, slot),
// independent of the ledger.
type memberRuns struct {
	mu     sync.Mutex
	runs   map[string]map[int64]int // member -> slot unix -> runs
	zones  map[string]string        // member -> zone of its last run
	manual int
}

func newMemberRuns() *memberRuns {
	return &memberRuns{runs: map[string]map[int64]int{}, zones: map[string]string{}}
}

func (m *memberRuns) handler(ctx context.Context, occ registry.Occurrence) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if occ.Manual {
		m.manual++
		return nil
	}
	if m.runs[occ.Member] == nil {
		m.runs[occ.Member] = map[int64]int{}
	}
	m.runs[occ.Member][occ.Slot.Unix()]++
	m.zones[occ.Member] = occ.Zone
	if name, _ := occ.Slot.Zone(); name == "" {
		return fmt.Errorf("slot %s has no zone", occ.Slot)
	}
	return nil
}

func (m *memberRuns) of(member string) map[int64]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[int64]int{}
	for k, v := range m.runs[member] {
		out[k] = v
	}
	return out
}

func (m *memberRuns) total() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, slots := range m.runs {
		for _, c := range slots {
			n += c
		}
	}
	return n
}

// zone is the zone of the member's newest run.
func (m *memberRuns) zone(member string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.zones[member]
}

// newest is the member's newest slot that ran (unix s).
func (m *memberRuns) newest(member string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var n int64
	for slot := range m.runs[member] {
		n = max(n, slot)
	}
	return n
}

// duplicates lists every (member, slot) that ran more than once.
func (m *memberRuns) duplicates() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for member, slots := range m.runs {
		for slot, n := range slots {
			if n > 1 {
				out = append(out, fmt.Sprintf("%s@%s x%d", member, time.Unix(slot, 0).UTC().Format(time.TimeOnly), n))
			}
		}
	}
	return out
}

// jumpClock is a clock that runs with real time from an offset that a
// test moves forward, to reach a DST transition or the next day.
type jumpClock struct{ offset atomic.Int64 }

func newJumpClock(at time.Time) *jumpClock {
	c := &jumpClock{}
	c.offset.Store(int64(time.Until(at)))
	return c
}

func (c *jumpClock) Now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

// jumpTo moves the clock to at.
func (c *jumpClock) jumpTo(at time.Time) { c.offset.Store(int64(time.Until(at))) }

type famCluster struct {
	ns, queue string
	rts       []*runtime.Runtime
	cancels   []context.CancelFunc
	runs      *memberRuns
	clock     *jumpClock
}

// familyRegistry is a family of the given expression and default zone.
func familyRegistry(t testing.TB, runs *memberRuns, queue, expr, zone string, tweak ...func(*registry.Schedule)) *registry.Registry {
	t.Helper()
	s := registry.Schedule{Name: "reports:weekly", Expr: expr, Zone: zone, Per: "tenant", Queue: queue,
		Handler: runs.handler, Grace: time.Minute}
	for _, f := range tweak {
		f(&s)
	}
	reg, err := registry.New(s, registry.Schedule{Name: "nightly", Expr: "17 3 * * *", Queue: queue, Handler: runs.handler})
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// newFamCluster runs n replicas of a family on one namespace with a
// worker, on clk (nil: real time).
func newFamCluster(t *testing.T, n int, clk *jumpClock, expr, zone string, tweak ...func(*registry.Schedule)) *famCluster {
	t.Helper()
	rdb := sharedRedis(t)
	c := &famCluster{ns: uniq("fam"), queue: uniq("q"), runs: newMemberRuns(), clock: clk}
	if c.clock == nil {
		c.clock = newJumpClock(time.Now())
	}
	reg := familyRegistry(t, c.runs, c.queue, expr, zone, tweak...)
	for i := range n {
		rt, err := runtime.NewWithClock(reg, runtime.Options{Redis: rdb, Namespace: c.ns, LeaseTTL: time.Second,
			SkewMargin: 365 * 24 * time.Hour, Replica: fmt.Sprintf("r%d", i), Logger: testLogger(t)}, c.clock)
		if err != nil {
			t.Fatal(err)
		}
		c.rts = append(c.rts, rt)
	}
	startWorker(t, rdb, c.queue, func(mux *asynq.ServeMux) { c.rts[0].RegisterHandlers(mux) })
	for _, rt := range c.rts {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { rt.Run(ctx); close(done) }()
		c.cancels = append(c.cancels, cancel)
		t.Cleanup(func() { cancel(); <-done; rt.Close() })
	}
	return c
}

func (c *famCluster) leader() *runtime.Runtime {
	for _, rt := range c.rts {
		if rt.Leadership().Leading() && rt.Scheduling() {
			return rt
		}
	}
	return nil
}

func (c *famCluster) waitLeader(t *testing.T) *runtime.Runtime {
	t.Helper()
	waitFor(t, 5*time.Second, "a leader scheduling", func() bool { return c.leader() != nil })
	return c.leader()
}

const family = "reports:weekly"

func TestFamilyMembersAPI(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	runs := newMemberRuns()
	rt, err := runtime.New(familyRegistry(t, runs, "q", "0 9 * * MON", "UTC"), runtime.Options{Redis: sharedRedis(t),
		Namespace: uniq("fam"), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	created, err := rt.Families().Set(ctx, family, runtime.Member{Key: "acme", Zone: "Europe/Paris"})
	if err != nil || !created {
		t.Fatalf("SetMember(acme) = %v, %v; want created", created, err)
	}
	created, err = rt.Families().Set(ctx, family, runtime.Member{Key: "acme", Zone: "Asia/Tokyo", Expr: "30 8 * * *", Paused: true})
	if err != nil || created {
		t.Fatalf("SetMember(acme) again = %v, %v; want updated", created, err)
	}
	got, err := rt.Families().Get(ctx, family, "acme")
	if want := (runtime.Member{Key: "acme", Zone: "Asia/Tokyo", Expr: "30 8 * * *", Paused: true}); err != nil || got != want {
		t.Errorf("Member(acme) = %+v, %v; want %+v", got, err, want)
	}
	// The family's own zone and expression read back as the zone and an
	// empty expression: such members follow the code's default.
	if _, err := rt.Families().Set(ctx, family, runtime.Member{Key: "globex", Expr: "0 9 * * MON"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := rt.Families().Get(ctx, family, "globex"); got != (runtime.Member{Key: "globex", Zone: "UTC"}) {
		t.Errorf("Member(globex) = %+v; want the family's zone and no expression", got)
	}

	var bulk []runtime.Member
	for i := range 1200 {
		bulk = append(bulk, runtime.Member{Key: fmt.Sprintf("t-%04d", i), Zone: []string{"UTC", "America/New_York", "Australia/Lord_Howe"}[i%3]})
	}
	if err := rt.Families().SetMany(ctx, family, bulk); err != nil {
		t.Fatal(err)
	}
	if n, err := rt.Families().Count(ctx, family); err != nil || n != 1202 {
		t.Errorf("MemberCount = %d, %v; want 1202", n, err)
	}
	seen := map[string]bool{}
	for cursor, pages := "", 0; ; pages++ {
		page, next, err := rt.Families().List(ctx, family, cursor, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) > 100 {
			t.Fatalf("a page asked for at most 100 members has %d", len(page))
		}
		for _, m := range page {
			if seen[m.Key] {
				t.Errorf("%s listed twice", m.Key)
			}
			seen[m.Key] = true
		}
		if next == "" {
			break
		}
		if pages > 100 {
			t.Fatal("paging does not end")
		}
		cursor = next
	}
	if len(seen) != 1202 {
		t.Errorf("paging saw %d members; want 1202", len(seen))
	}
	found, _, err := rt.Families().Search(ctx, family, "t-011", "", 1000)
	if err != nil || len(found) != 10 {
		t.Errorf("SearchMembers(t-011) found %d (%v); want 10", len(found), err)
	}
	globex, _ := rt.Families().Get(ctx, family, "globex")
	infos, err := rt.Families().Infos(ctx, family, []runtime.Member{globex})
	if err != nil || len(infos) != 1 || infos[0].Next.IsZero() || infos[0].Next.Weekday() != time.Monday || infos[0].Last != nil {
		t.Errorf("MemberInfos = %+v, %v; want a Monday next run and no last run", infos, err)
	}

	// The family's next run is its earliest member's: Tokyo's 08:30 daily
	// (acme), unless a Monday 09:00 far east (Lord Howe's) comes first,
	// as it does from Saturday evening UTC.
	next, err := rt.Families().Next(ctx, family)
	now := time.Now()
	var earliest time.Time
	for _, key := range []string{"acme", "globex", "t-0000", "t-0001", "t-0002"} {
		m, _ := rt.Families().Get(ctx, family, key)
		s, serr := rt.Families().Schedule(family, m)
		if serr != nil {
			t.Fatal(serr)
		}
		if at := s.Next(now); earliest.IsZero() || at.Before(earliest) {
			earliest = at
		}
	}
	if acme, _ := rt.Families().Schedule(family, got); err != nil || !next.Equal(earliest) || next.After(acme.Next(now)) || !next.Before(infos[0].Next) {
		t.Errorf("FamilyNext = %s, %v; want the earliest member's %s, no later than acme's %s, before globex's %s",
			next, err, earliest, acme.Next(now), infos[0].Next)
	}
	if err := rt.Families().Delete(ctx, family, "acme"); err != nil {
		t.Fatal(err)
	}
	if err := rt.Families().Delete(ctx, family, "acme"); !errors.Is(err, runtime.ErrNoMember) {
		t.Errorf("DeleteMember twice: %v; want ErrNoMember", err)
	}
	if _, err := rt.Families().Get(ctx, family, "acme"); !errors.Is(err, runtime.ErrNoMember) {
		t.Errorf("Member after delete: %v; want ErrNoMember", err)
	}

	// Bad input: each error says what crongen would say.
	for _, tt := range []struct {
		m    runtime.Member
		want string
	}{
		{runtime.Member{Key: "bad key"}, "want 1-128 letters"},
		{runtime.Member{Key: "a:b"}, "want 1-128 letters"},
		{runtime.Member{Key: "x", Zone: "Mars/Olympus"}, `bad value "Mars/Olympus" for tz: unknown zone "Mars/Olympus"; want an IANA name such as tz=UTC`},
		{runtime.Member{Key: "x", Zone: "Local"}, "depends on the host"},
		{runtime.Member{Key: "x", Zone: "UTC|x"}, "unknown zone"},
		{runtime.Member{Key: "x", Expr: "0 25 * * *"}, `bad cron expression "0 25 * * *": `},
		{runtime.Member{Key: "x", Expr: "TZ=UTC 0 9 * * *"}, "tz="},
	} {
		if _, err := rt.Families().Set(ctx, family, tt.m); !errors.Is(err, runtime.ErrBadMember) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("SetMember(%+v) = %v; want ErrBadMember saying %q", tt.m, err, tt.want)
		}
	}
	before, _ := rt.Families().Count(ctx, family)
	err = rt.Families().SetMany(ctx, family, []runtime.Member{{Key: "fine-1"}, {Key: "fine-2", Expr: "not cron"}})
	if !errors.Is(err, runtime.ErrBadMember) || !strings.Contains(err.Error(), "fine-2") {
		t.Errorf("SetMembers with a bad member: %v; want ErrBadMember naming it", err)
	}
	if after, _ := rt.Families().Count(ctx, family); after != before {
		t.Errorf("a failed SetMembers wrote %d members", after-before)
	}
	if _, err := rt.Families().Set(ctx, "nightly", runtime.Member{Key: "x"}); !errors.Is(err, runtime.ErrNotAFamily) {
		t.Errorf("SetMember on an ordinary schedule: %v; want ErrNotAFamily", err)
	}
	if _, err := rt.Families().Set(ctx, "nope", runtime.Member{Key: "x"}); !errors.Is(err, runtime.ErrUnknownSchedule) {
		t.Errorf("SetMember on an unknown schedule: %v; want ErrUnknownSchedule", err)
	}
	if _, _, err := rt.Families().List(ctx, family, "not-a-cursor", 10); !errors.Is(err, runtime.ErrBadMember) {
		t.Errorf("Members with a bad cursor: %v", err)
	}
	if _, err := rt.Trigger(ctx, family, ""); !errors.Is(err, runtime.ErrNoMember) {
		t.Errorf("Trigger on a family: %v; want ErrNoMember (say which member)", err)
	}
	if _, err := rt.Families().Trigger(ctx, family, "acme", ""); !errors.Is(err, runtime.ErrNoMember) {
		t.Errorf("TriggerMember of a deleted member: %v; want ErrNoMember", err)
	}
}

// A family small enough for Redis to keep it compact, which HSCAN
// returns whole, still comes in pages of at most the limit, listing and
// finding every member once.
func TestFamilyPagesOfASmallFamily(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rt, err := runtime.New(familyRegistry(t, newMemberRuns(), "q", "0 9 * * MON", "UTC"), runtime.Options{Redis: sharedRedis(t),
		Namespace: uniq("fam"), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	var ms []runtime.Member
	for i := range 100 {
		ms = append(ms, runtime.Member{Key: fmt.Sprintf("t-%03d", i)})
	}
	if err := rt.Families().SetMany(ctx, family, ms); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		substr string
		want   int
	}{{"", 100}, {"t-01", 10}, {"5", 19}} {
		listed := map[string]int{}
		for cursor, pages := "", 1; ; pages++ {
			page, next, err := rt.Families().Search(ctx, family, tt.substr, cursor, 3)
			if err != nil {
				t.Fatal(err)
			}
			if len(page) > 3 {
				t.Fatalf("search %q: page %d asked for at most 3 members has %d", tt.substr, pages, len(page))
			}
			for _, m := range page {
				if !strings.Contains(m.Key, tt.substr) {
					t.Errorf("search %q found %s", tt.substr, m.Key)
				}
				listed[m.Key]++
			}
			if next == "" {
				break
			}
			if pages > 1000 {
				t.Fatal("paging does not end")
			}
			cursor = next
		}
		if len(listed) != tt.want {
			t.Errorf("search %q listed %d members, want %d", tt.substr, len(listed), tt.want)
		}
		for k, n := range listed {
			if n != 1 {
				t.Errorf("search %q listed %s %d times", tt.substr, k, n)
			}
		}
	}
}

// Members added, changed and removed while a replica leads are picked up
// without a restart; every (member, slot) runs once.
func TestFamilyAddRemoveUpdateWhileLeading(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newFamCluster(t, 1, nil, "* * * * * *", "UTC")
	rt := c.waitLeader(t)
	if _, err := rt.Families().Set(ctx, family, runtime.Member{Key: "acme"}); err != nil {
		t.Fatal(err)
	}
	added := time.Now()
	waitFor(t, 5*time.Second, "acme to run", func() bool { return len(c.runs.of("acme")) >= 2 })
	for slot := range c.runs.of("acme") {
		if time.Unix(slot, 0).Before(added.Truncate(time.Second)) {
			t.Errorf("acme ran for %s, before it was added at %s", time.Unix(slot, 0), added)
		}
	}
	// A member in a zone no other has: a new bucket, seen within a second.
	if _, err := rt.Families().Set(ctx, family, runtime.Member{Key: "globex", Zone: "Asia/Kathmandu"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 3*time.Second, "globex (a new bucket) to run", func() bool { return len(c.runs.of("globex")) >= 2 })
	if z := c.runs.zone("globex"); z != "Asia/Kathmandu" {
		t.Errorf("globex ran in zone %q", z)
	}

	if err := rt.Families().Delete(ctx, family, "acme"); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	// Pausing globex: its slots are recorded paused, none runs.
	if err := rt.Families().Pause(runtime.WithActor(ctx, "ops"), family, "globex", "billing dispute"); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	// An expression of its own: every other second.
	if _, err := rt.Families().Set(ctx, family, runtime.Member{Key: "initech", Expr: "*/2 * * * * *"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 6*time.Second, "initech to run twice", func() bool { return len(c.runs.of("initech")) >= 2 })
	settle := time.Now().Add(time.Second) // past anything in flight
	waitFor(t, 3*time.Second, "a second", func() bool { return time.Now().After(settle) })

	for slot := range c.runs.of("acme") {
		if time.Unix(slot, 0).After(deleted.Add(time.Second)) {
			t.Errorf("acme ran for %s after it was deleted at %s", time.Unix(slot, 0), deleted)
		}
	}
	for slot := range c.runs.of("globex") {
		if time.Unix(slot, 0).After(paused.Add(time.Second)) {
			t.Errorf("paused globex ran for %s (paused at %s)", time.Unix(slot, 0), paused)
		}
	}
	for slot := range c.runs.of("initech") {
		if slot%2 != 0 {
			t.Errorf("initech ran for odd second %d; its expression is */2", slot)
		}
	}
	if d := c.runs.duplicates(); len(d) > 0 {
		t.Errorf("duplicates: %v", d)
	}
	infos, err := rt.Families().Infos(ctx, family, []runtime.Member{{Key: "globex", Zone: "Asia/Kathmandu", Paused: true}})
	if err != nil || infos[0].Last == nil || infos[0].Last.Outcome != runtime.OutcomePaused {
		t.Errorf("globex's last run: %+v, %v; want paused", infos[0].Last, err)
	}
	if p := infos[0].Pause; p == nil || p.Reason != "billing dispute" || p.Actor != "ops" || p.At.IsZero() {
		t.Errorf("globex's pause: %+v; want the reason, actor and time", p)
	}
	if err := rt.Families().Resume(ctx, family, "globex"); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now().Add(time.Second).Unix()
	waitFor(t, 5*time.Second, "globex to run again", func() bool { return c.runs.newest("globex") > resumed })
	if infos, _ := rt.Families().Infos(ctx, family, []runtime.Member{{Key: "globex", Zone: "Asia/Kathmandu"}}); infos[0].Pause != nil {
		t.Errorf("a resumed member keeps its pause: %+v", infos[0].Pause)
	}
	if err := rt.Families().Pause(ctx, family, "nobody", ""); !errors.Is(err, runtime.ErrNoMember) {
		t.Errorf("PauseMember of an unknown member: %v", err)
	}
	hist, err := rt.Families().History(ctx, family, "initech", 3)
	if err != nil || len(hist) == 0 || hist[0].Member != "initech" {
		t.Errorf("MemberHistory(initech) = %+v, %v", hist, err)
	}
	counters, _ := rt.Monitor().Counters(ctx)
	if fc := counters[family]; fc.Enqueued < 5 || fc.Paused < 1 {
		t.Errorf("family counters %+v; want its members' enqueues and pauses", fc)
	}
	// A manual run of one member, recorded with it.
	occ, err := rt.Families().Trigger(ctx, family, "initech", "")
	if err != nil || occ.Member != "initech" || !strings.Contains(occ.ID, ":member:initech:manual:") {
		t.Errorf("TriggerMember = %+v, %v", occ, err)
	}
	waitFor(t, 5*time.Second, "the manual run", func() bool { c.runs.mu.Lock(); defer c.runs.mu.Unlock(); return c.runs.manual == 1 })
}

// Several replicas, one leader at a time, stepping down mid-run: every
// member's every slot runs once, none twice.
func TestFamilyExactlyOncePerMemberAcrossReplicas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newFamCluster(t, 3, nil, "* * * * * *", "UTC")
	rt := c.waitLeader(t)
	zones := []string{"UTC", "Europe/London", "America/New_York", "Asia/Kolkata", "Australia/Lord_Howe"}
	var ms []runtime.Member
	for i := range 50 {
		ms = append(ms, runtime.Member{Key: fmt.Sprintf("m%02d", i), Zone: zones[i%len(zones)]})
	}
	if err := rt.Families().SetMany(ctx, family, ms); err != nil {
		t.Fatal(err)
	}
	start := time.Now().Truncate(time.Second).Add(2 * time.Second)
	waitFor(t, 5*time.Second, "every member to run", func() bool { c.runs.mu.Lock(); defer c.runs.mu.Unlock(); return len(c.runs.runs) == 50 })
	// Hand over twice: graceful shutdown of the leader, then the next.
	for range 2 {
		waitFor(t, 5*time.Second, "a leader", func() bool { return c.leader() != nil })
		for i, r := range c.rts {
			if r == c.leader() {
				c.cancels[i]()
				break
			}
		}
		// A few slots under the next leader.
		until := time.Now().Add(1500 * time.Millisecond).Unix()
		waitFor(t, 6*time.Second, "slots under the next leader", func() bool { return c.runs.newest("m00") >= until })
	}
	end := time.Now().Truncate(time.Second).Add(-2 * time.Second)
	waitFor(t, 5*time.Second, "the last slots to run", func() bool { return c.runs.newest("m49") > end.Unix()+1 })
	if d := c.runs.duplicates(); len(d) > 0 {
		t.Errorf("duplicates across handovers: %v", d)
	}
	for _, m := range ms {
		runs := c.runs.of(m.Key)
		for slot := start; !slot.After(end); slot = slot.Add(time.Second) {
			if runs[slot.Unix()] != 1 {
				t.Errorf("%s ran %d times for %s", m.Key, runs[slot.Unix()], slot.Format(time.TimeOnly))
			}
		}
	}
}

// runsAt waits until member ran for slot, or fails the test.
func (c *famCluster) waitRun(t *testing.T, member string, slot time.Time) {
	t.Helper()
	waitFor(t, 8*time.Second, member+" to run for "+slot.UTC().Format(time.RFC3339), func() bool { return c.runs.of(member)[slot.Unix()] > 0 })
}

// waitClock waits until the cluster's clock reads at.
func (c *famCluster) waitClock(t *testing.T, at time.Time) {
	t.Helper()
	waitFor(t, time.Until(at.Add(-time.Duration(c.clock.offset.Load())))+5*time.Second, "the clock to reach "+at.Format(time.RFC3339),
		func() bool { return !c.clock.Now().Before(at) })
}

// Each member follows cronie's DST rules in its own zone.
func TestFamilyMembersAcrossDST(t *testing.T) {
	t.Parallel()
	ny, _ := time.LoadLocation("America/New_York")
	for _, tt := range []struct {
		name  string
		start time.Time
		// member -> expr, zone
		members []runtime.Member
		// member -> the one slot it runs for in the window ({} if none)
		want  map[string]time.Time
		until time.Time
	}{
		{"spring forward", time.Date(2026, 3, 8, 6, 59, 56, 0, time.UTC), []runtime.Member{
			{Key: "fixed-in-gap", Zone: "America/New_York"},                          // 02:30 does not exist: 03:00 EDT
			{Key: "hourly", Zone: "America/New_York", Expr: "0 * * * *"},             // 03:00 EDT
			{Key: "wildcard-in-gap", Zone: "America/New_York", Expr: "*/15 2 * * *"}, // hour 2 does not exist: nothing
			{Key: "utc", Zone: "UTC", Expr: "0 7 * * *"},
		}, map[string]time.Time{
			"fixed-in-gap": time.Date(2026, 3, 8, 3, 0, 0, 0, ny),
			"hourly":       time.Date(2026, 3, 8, 3, 0, 0, 0, ny),
			"utc":          time.Date(2026, 3, 8, 7, 0, 0, 0, time.UTC),
		}, time.Date(2026, 3, 8, 7, 0, 3, 0, time.UTC)},
		{"fall back", time.Date(2026, 11, 1, 5, 59, 56, 0, time.UTC), []runtime.Member{
			{Key: "fixed-in-fold", Zone: "America/New_York", Expr: "0 1 * * *"}, // ran at the first 01:00 (EDT) only
			{Key: "hourly", Zone: "America/New_York", Expr: "0 * * * *"},        // both 01:00s: the second, EST, here
			{Key: "london", Zone: "Europe/London", Expr: "0 6 * * *"},
		}, map[string]time.Time{
			"hourly": time.Date(2026, 11, 1, 6, 0, 0, 0, time.UTC),
			"london": time.Date(2026, 11, 1, 6, 0, 0, 0, time.UTC),
		}, time.Date(2026, 11, 1, 6, 0, 3, 0, time.UTC)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			c := newFamCluster(t, 1, newJumpClock(tt.start), "30 2 * * *", "UTC")
			rt := c.waitLeader(t)
			if err := rt.Families().SetMany(ctx, family, tt.members); err != nil {
				t.Fatal(err)
			}
			for member, slot := range tt.want {
				c.waitRun(t, member, slot)
			}
			c.waitClock(t, tt.until)
			// Every member of a zone is in one bucket's dispatch: past the
			// controls' runs, the others have had theirs.
			for _, m := range tt.members {
				runs := c.runs.of(m.Key)
				want, ok := tt.want[m.Key]
				switch {
				case !ok && len(runs) > 0:
					t.Errorf("%s ran %v; want no run in the window", m.Key, runs)
				case ok && (len(runs) != 1 || runs[want.Unix()] != 1):
					t.Errorf("%s ran %v; want once, for %s", m.Key, runs, want.Format(time.RFC3339))
				}
			}
		})
	}
}

// A member whose zone changes mid-week after its Thursday 09:00 in Tokyo
// does not run Thursday 09:00 again in New York; it runs Friday's.
func TestFamilyZoneChangeMidWeek(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Thursday 08:59:56 in Tokyo.
	c := newFamCluster(t, 1, newJumpClock(time.Date(2026, 3, 4, 23, 59, 56, 0, time.UTC)), "0 9 * * *", "UTC")
	rt := c.waitLeader(t)
	if err := rt.Families().SetMany(ctx, family, []runtime.Member{{Key: "mover", Zone: "Asia/Tokyo"},
		{Key: "ny", Zone: "America/New_York"}}); err != nil {
		t.Fatal(err)
	}
	thuTokyo := time.Date(2026, 3, 5, 0, 0, 0, 0, time.UTC)
	c.waitRun(t, "mover", thuTokyo)
	if _, err := rt.Families().Set(ctx, family, runtime.Member{Key: "mover", Zone: "America/New_York"}); err != nil {
		t.Fatal(err)
	}
	thuNY, friNY := time.Date(2026, 3, 5, 14, 0, 0, 0, time.UTC), time.Date(2026, 3, 6, 14, 0, 0, 0, time.UTC)
	c.clock.jumpTo(thuNY.Add(-4 * time.Second))
	c.waitRun(t, "ny", thuNY) // the same bucket's dispatch had mover too
	c.clock.jumpTo(friNY.Add(-4 * time.Second))
	c.waitRun(t, "mover", friNY)
	c.waitRun(t, "ny", friNY)
	if runs := c.runs.of("mover"); len(runs) != 2 || runs[thuNY.Unix()] != 0 {
		t.Errorf("mover ran %v; want Thursday 09:00 Tokyo and Friday 09:00 New York only", runs)
	}
}

// The leader is cut off from Redis in the middle of a slot's 6,000
// enqueues, with nothing flushed and its lease left to expire, as a
// killed or partitioned process leaves it: the other replica takes over
// and enqueues the rest, the pages the first enqueued and did not commit
// are refused by asynq as duplicates, and what the cut-off leader sends
// once the partition heals is fenced. Every member runs once for the
// slot.
func TestFamilyLeaderCutOffMidSpike(t *testing.T) {
	longTest(t)
	t.Parallel()
	ctx := context.Background()
	runs, queue, ns := newMemberRuns(), uniq("q"), uniq("fam")
	reg := familyRegistry(t, runs, queue, "*/10 * * * * *", "UTC")
	proxy := redistest.NewProxy(t, "tcp", sharedRedisAddr())
	var rts []*runtime.Runtime
	for i, rdb := range []redis.UniversalClient{proxy.Client(t, redis.Options{}), sharedRedis(t)} {
		rt, err := runtime.New(reg, runtime.Options{Redis: rdb, Namespace: ns, LeaseTTL: time.Second,
			Replica: fmt.Sprintf("r%d", i), Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		rts = append(rts, rt)
	}
	for range 4 {
		startWorker(t, sharedRedis(t), queue, func(mux *asynq.ServeMux) { rts[1].RegisterHandlers(mux) })
	}
	runUntilTheEnd(t, rts[0])
	waitFor(t, 10*time.Second, "r0 to lead", rts[0].Leadership().Leading)
	runUntilTheEnd(t, rts[1])
	const n = 6000
	ms := make([]runtime.Member, n)
	for i := range ms {
		ms[i] = runtime.Member{Key: fmt.Sprintf("t%05d", i)}
	}
	if err := rts[1].Families().SetMany(ctx, family, ms); err != nil {
		t.Fatal(err)
	}
	rdb := sharedRedis(t)
	cursors := store.KeyPrefix(ns) + "fam:{" + family + "}:c"
	waitFor(t, 15*time.Second, "r0's spike to be under way", func() bool {
		k, _ := rdb.HLen(ctx, cursors).Result()
		return k > 0
	})
	proxy.BlackHole()
	// The slot whose enqueues were under way: a committed member's cursor.
	kv, err := rdb.HRandFieldWithValues(ctx, cursors, 1).Result()
	if err != nil || len(kv) != 1 {
		t.Fatalf("reading a member's cursor: %v %v", kv, err)
	}
	spike, err := strconv.ParseInt(strings.Fields(kv[0].Value)[0], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if k, _ := rdb.HLen(ctx, cursors).Result(); k >= n {
		t.Logf("r0 had committed all %d members when it was cut off: the takeover only proved nothing ran twice", k)
	}
	waitFor(t, 10*time.Second, "r1 to take over", rts[1].Leadership().Leading)
	allRan := func(slot int64) func() bool {
		return func() bool {
			runs.mu.Lock()
			defer runs.mu.Unlock()
			for i := range n {
				if runs.runs[fmt.Sprintf("t%05d", i)][slot] == 0 {
					return false
				}
			}
			return true
		}
	}
	// Under -race on a loaded machine the workers run a few hundred a
	// second: the deadlines only bound a hang.
	waitFor(t, 120*time.Second, "every member's spike slot to run", allRan(spike))
	proxy.Pass() // what r0 still holds arrives now, late
	waitFor(t, 10*time.Second, "r0 to see it lost the lease", func() bool { return !rts[0].Leadership().Leading() })
	// A late enqueue that got through would have run by the time every
	// member ran a slot after the partition healed.
	after := (time.Now().Unix()/10 + 1) * 10
	waitFor(t, 120*time.Second, "every member's slot after the partition to run", allRan(after))
	if d := runs.duplicates(); len(d) > 0 {
		t.Errorf("%d duplicates, e.g. %v", len(d), d[:min(5, len(d))])
	}
}

// A change of expression moves a member's next run and adds none
// (familychange.go): a weekly report that ran Monday 09:00 and is moved
// to 10:00 that morning does not run again at 10:00, and a daily member
// made every ten minutes is not given the ten-minute slots since its last
// run, neither run nor recorded missed. Before the rule, the first ran
// twice that Monday and the second had five slots recorded missed.
func TestFamilyExpressionChangeMovesTheRunAndAddsNone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	monday := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	c := newFamCluster(t, 1, newJumpClock(monday.Add(-4*time.Second)), "0 9 * * MON", "UTC")
	rt := c.waitLeader(t)
	if err := rt.Families().SetMany(ctx, family, []runtime.Member{{Key: "weekly"}, {Key: "daily", Expr: "0 9 * * *"}}); err != nil {
		t.Fatal(err)
	}
	c.waitRun(t, "weekly", monday)
	c.waitRun(t, "daily", monday)
	ten := monday.Add(time.Hour)
	c.clock.jumpTo(ten.Add(-5 * time.Second))
	for _, m := range []runtime.Member{{Key: "weekly", Expr: "0 10 * * MON"}, {Key: "daily", Expr: "*/10 * * * *"},
		// Members new to the same buckets, whose runs at 10:00 say the
		// buckets were dispatched.
		{Key: "control-weekly", Expr: "0 10 * * MON"}, {Key: "control-ten", Expr: "*/10 * * * *"}} {
		if _, err := rt.Families().Set(ctx, family, m); err != nil {
			t.Fatal(err)
		}
	}
	infos, err := rt.Families().Infos(ctx, family, []runtime.Member{{Key: "weekly", Zone: "UTC", Expr: "0 10 * * MON"},
		{Key: "daily", Zone: "UTC", Expr: "*/10 * * * *"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := monday.AddDate(0, 0, 7).Add(time.Hour); !infos[0].Next.Equal(want) {
		t.Errorf("weekly's next run is shown as %s; want %s", infos[0].Next.UTC(), want)
	}
	if want := monday.AddDate(0, 0, 1); !infos[1].Next.Equal(want) {
		t.Errorf("daily's next run is shown as %s; want %s (its moved daily run)", infos[1].Next.UTC(), want)
	}
	c.waitRun(t, "control-weekly", ten)
	c.waitRun(t, "control-ten", ten)
	// Each bucket's page (a control and the changed member) is committed
	// as one: once the counters hold the controls' enqueues and every
	// enqueue has run, whatever the 10:00 dispatches did is in.
	waitFor(t, 10*time.Second, "the 10:00 dispatches to be committed and run", func() bool {
		counters, err := rt.Monitor().Counters(ctx)
		return err == nil && counters[family].Enqueued >= 4 && int64(c.runs.total()) == counters[family].Enqueued
	})
	for _, m := range []string{"weekly", "daily"} {
		if runs := c.runs.of(m); len(runs) != 1 || runs[monday.Unix()] != 1 {
			t.Errorf("%s ran %v; want Monday 09:00 only", m, runs)
		}
	}
	counters, err := rt.Monitor().Counters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fc := counters[family]; fc.Missed != 0 {
		t.Errorf("%d slots recorded missed; want none: the slots before a change were never intended", fc.Missed)
	}
}

// A member added in a (zone, expression) no member had makes a new bucket,
// whose first slot the leader takes from as far back as grace; that
// catch-up is not the leader's lateness. It was counted as such: a leader
// that had led for a few seconds measured the new bucket's first dispatch
// as seconds late and handed the lease over (or, alone, logged that its
// enqueues fell behind).
func TestANewBucketIsNoLateness(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newFamCluster(t, 2, nil, "*/2 * * * * *", "UTC")
	rt := c.waitLeader(t)
	if _, err := rt.Families().Set(ctx, family, runtime.Member{Key: "steady"}); err != nil {
		t.Fatal(err)
	}
	// Leading for longer than three handover bounds (2 s each here).
	waitFor(t, 30*time.Second, "steady to run four slots", func() bool { return len(c.runs.of("steady")) >= 4 })
	if _, err := rt.Families().Set(ctx, family, runtime.Member{Key: "new", Expr: "*/30 * * * * *"}); err != nil {
		t.Fatal(err)
	}
	bucketCursors := store.KeyPrefix(c.ns) + "fam:{" + family + "}:bc"
	waitFor(t, 10*time.Second, "the new bucket's first dispatch", func() bool {
		ok, _ := sharedRedis(t).HExists(ctx, bucketCursors, "|*/30 * * * * *").Result()
		return ok
	})
	// The schedule loop judges the family's dispatches between its own
	// turns: two more of steady's slots and it has.
	runs := len(c.runs.of("steady"))
	waitFor(t, 10*time.Second, "steady to run two more slots", func() bool { return len(c.runs.of("steady")) >= runs+2 })
	if n := rt.Leadership().HandoversForLateness(); n != 0 || !rt.Leadership().Leading() {
		t.Errorf("after a new bucket: %d handovers for lateness, leading %v; want none, still leading", n, rt.Leadership().Leading())
	}
}

// The leader stops in the middle of a slot's 6,000 enqueues (members
// committed page by page): the next one enqueues the rest, each member
// once.
func TestFamilyTakeoverMidSpike(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newFamCluster(t, 2, nil, "*/4 * * * * *", "UTC")
	rt := c.waitLeader(t)
	const n = 6000
	ms := make([]runtime.Member, n)
	for i := range ms {
		ms[i] = runtime.Member{Key: fmt.Sprintf("t%05d", i)}
	}
	if err := rt.Families().SetMany(ctx, family, ms); err != nil {
		t.Fatal(err)
	}
	// More workers, so that 12,000 runs take seconds, not minutes.
	for range 3 {
		startWorker(t, sharedRedis(t), c.queue, func(mux *asynq.ServeMux) { c.rts[0].RegisterHandlers(mux) })
	}
	rdb := sharedRedis(t)
	cursors := store.KeyPrefix(c.ns) + "fam:{" + family + "}:c"
	// The spike's first pages are committed, not all of them: stop the
	// leader now.
	waitFor(t, 10*time.Second, "the spike to be under way", func() bool {
		k, _ := rdb.HLen(ctx, cursors).Result()
		return k > 0
	})
	first := time.Now().Truncate(time.Second)
	for i, r := range c.rts {
		if r.Leadership().Leading() {
			c.cancels[i]()
		}
	}
	if k, _ := rdb.HLen(ctx, cursors).Result(); k >= n {
		t.Logf("the leader had committed all %d members before it stopped: the takeover only proved nothing ran twice", k)
	}
	// 12,000 runs through four workers: seconds on a quiet machine, but
	// many times that under -race on a loaded one, so the deadline only
	// bounds a hang.
	waitFor(t, 120*time.Second, "every member's spike slot and the next to run", func() bool {
		for _, m := range []string{"t00000", "t02999", "t05999"} {
			if len(c.runs.of(m)) < 2 {
				return false
			}
		}
		return c.runs.total() >= 2*n
	})
	if d := c.runs.duplicates(); len(d) > 0 {
		t.Errorf("%d duplicates, e.g. %v", len(d), d[:min(5, len(d))])
	}
	spike := time.Unix(0, 0)
	for slot := range c.runs.of("t00000") {
		if s := time.Unix(slot, 0); s.Before(first.Add(time.Second)) && s.After(spike) {
			spike = s
		}
	}
	for i := range n {
		key := fmt.Sprintf("t%05d", i)
		if c.runs.of(key)[spike.Unix()] != 1 {
			t.Fatalf("%s ran %d times for the spike slot %s", key, c.runs.of(key)[spike.Unix()], spike.Format(time.TimeOnly))
		}
	}
}

// overlap=skip holds per member: a slow member's slots are skipped while
// its previous run lasts, and the others' run on time; a re-run of one
// member's past slot carries that slot's key.
func TestFamilyOverlapSkipPerMember(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	release := make(chan struct{})
	c := newFamCluster(t, 1, nil, "* * * * * *", "UTC", func(s *registry.Schedule) {
		s.Overlap = registry.OverlapSkip
		record := s.Handler
		s.Handler = func(ctx context.Context, occ registry.Occurrence) error {
			err := record(ctx, occ)
			if occ.Member == "slow" && !occ.Manual {
				select { // busy until the test ends
				case <-release:
				case <-ctx.Done():
				}
			}
			return err
		}
	})
	t.Cleanup(func() { close(release) }) // before the worker's shutdown, which waits for it
	rt := c.waitLeader(t)
	if err := rt.Families().SetMany(ctx, family, []runtime.Member{{Key: "slow"}, {Key: "fast"}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 8*time.Second, "fast to run five slots", func() bool { return len(c.runs.of("fast")) >= 5 })
	if slow := c.runs.of("slow"); len(slow) != 1 {
		t.Errorf("slow ran %d slots while its first run lasted; want 1 (the rest skipped)", len(slow))
	}
	fast := c.runs.of("fast")
	newest := c.runs.newest("fast")
	for slot := newest - 4; slot <= newest; slot++ {
		if fast[slot] != 1 {
			t.Errorf("fast ran %d times for %d; the slow member must not hold it up", fast[slot], slot)
		}
	}
	counters, _ := rt.Monitor().Counters(ctx)
	if counters[family].Skipped < 3 {
		t.Errorf("family counters %+v; want slow's slots counted skipped", counters[family])
	}
	slot := time.Unix(newest, 0)
	occ, err := rt.Families().Rerun(ctx, family, "fast", slot, "")
	if err != nil || !occ.Manual || occ.Member != "fast" || occ.Key() != (registry.Scope{Namespace: c.ns, Schedule: family, Member: "fast"}).ID(slot) {
		t.Errorf("RerunMember = %+v (key %s), %v; want the slot's scheduled key", occ, occ.Key(), err)
	}
	if _, err := rt.Families().Rerun(ctx, family, "fast", slot.Add(time.Hour), ""); !errors.Is(err, runtime.ErrNotASlot) {
		t.Errorf("RerunMember of a future slot: %v; want ErrNotASlot", err)
	}
}

// A member added two seconds before its slot, in a zone no other member
// has (a bucket the leader has never seen), runs at that slot.
func TestFamilyMemberAddedJustBeforeItsSlotRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	paris, _ := time.LoadLocation("Europe/Paris")
	nine := time.Date(2026, 3, 9, 9, 0, 0, 0, paris) // a Monday
	c := newFamCluster(t, 2, newJumpClock(nine.Add(-5*time.Second)), "0 9 * * MON", "UTC")
	rt := c.waitLeader(t)
	if _, err := rt.Families().Set(ctx, family, runtime.Member{Key: "early", Zone: "UTC"}); err != nil {
		t.Fatal(err)
	}
	c.waitClock(t, nine.Add(-2*time.Second)) // 08:59:58 in Paris
	if _, err := rt.Families().Set(ctx, family, runtime.Member{Key: "acme", Zone: "Europe/Paris"}); err != nil {
		t.Fatal(err)
	}
	c.waitRun(t, "acme", nine)
	if runs := c.runs.of("acme"); len(runs) != 1 {
		t.Errorf("acme ran %v; want once, at 09:00 Paris", runs)
	}
	if z := c.runs.zone("acme"); z != "Europe/Paris" {
		t.Errorf("acme ran in %q", z)
	}
}

// Pause on the family's name pauses every member; Resume lets them run.
func TestFamilyPauseOfTheWholeFamily(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newFamCluster(t, 1, nil, "* * * * * *", "UTC")
	rt := c.waitLeader(t)
	if err := rt.Families().SetMany(ctx, family, []runtime.Member{{Key: "acme"}, {Key: "globex", Zone: "Asia/Tokyo"}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "both to run", func() bool { return c.runs.newest("acme") > 0 && c.runs.newest("globex") > 0 })
	if err := rt.Pause(ctx, family, "maintenance"); err != nil {
		t.Fatal(err)
	}
	paused := time.Now().Add(time.Second).Unix()
	waitFor(t, 5*time.Second, "slots to be recorded paused", func() bool {
		counters, _ := rt.Monitor().Counters(ctx)
		return counters[family].Paused >= 4
	})
	for _, m := range []string{"acme", "globex"} {
		if n := c.runs.newest(m); n > paused {
			t.Errorf("%s ran for %d while its family was paused (from %d)", m, n, paused)
		}
	}
	if err := rt.Resume(ctx, family); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now().Add(time.Second).Unix()
	waitFor(t, 5*time.Second, "both to run again", func() bool {
		return c.runs.newest("acme") > resumed && c.runs.newest("globex") > resumed
	})
	if d := c.runs.duplicates(); len(d) > 0 {
		t.Errorf("duplicates: %v", d)
	}
}
