package runtime_test

import (
	"context"
	"fmt"
	"github.com/belfry/belfry/runtime/internal/store"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

var namespaceRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$`)

func TestDefaultNamespaceIsNamedAfterTheRegistrysPackage(t *testing.T) {
	t.Parallel()
	nop := func(context.Context, registry.Occurrence) error { return nil }
	billing := registry.MustNew(registry.Schedule{Name: "invoice", Expr: "@daily", Handler: nop, Package: "github.com/acme/billing/v2/jobs"})
	billingNext := registry.MustNew( // the next deploy of the same service
		registry.Schedule{Name: "invoice", Expr: "@hourly", Handler: nop, Package: "github.com/acme/billing/v2/jobs"},
		registry.Schedule{Name: "dunning", Expr: "@daily", Handler: nop, Package: "github.com/acme/billing/v2/jobs"},
	)
	shop := registry.MustNew(registry.Schedule{Name: "invoice", Expr: "@daily", Handler: nop, Package: "github.com/acme/shop/jobs"})
	extra := registry.MustNew(registry.Schedule{Name: "extra", Expr: "@daily", Handler: nop, Package: "github.com/acme/billing/v2/reports"})
	merged, err := registry.Merge(billing, extra)
	if err != nil {
		t.Fatal(err)
	}
	byHand := registry.MustNew(registry.Schedule{Name: "invoice", Expr: "@daily", Handler: nop})

	ns := runtime.DefaultNamespace(billing)
	if !regexp.MustCompile(`^billing\.jobs-[0-9a-f]{8}$`).MatchString(ns) {
		t.Errorf("DefaultNamespace = %q, want billing.jobs-<8 hex digits>", ns)
	}
	for _, c := range []struct {
		what string
		reg  *registry.Registry
		same bool
	}{
		{"the same package with other schedules", billingNext, true},
		{"a merged registry whose first package is the same", merged, true},
		{"another service's package of the same last element", shop, false},
		{"a registry built by hand (named after the binary)", byHand, false},
	} {
		got := runtime.DefaultNamespace(c.reg)
		if (got == ns) != c.same {
			t.Errorf("%s: namespace %q, billing's %q; want same=%v", c.what, got, ns, c.same)
		}
		if !namespaceRE.MatchString(got) || strings.Contains(got, "/") || got == runtime.NamespaceLegacy {
			t.Errorf("%s: namespace %q is not a valid derived namespace", c.what, got)
		}
	}
	rt, err := runtime.New(billing, runtime.Options{RedisURL: "redis://" + sharedRedisAddr()})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if rt.Namespace() != ns {
		t.Errorf("runtime's namespace %q, want the default %q", rt.Namespace(), ns)
	}
}

// service is one service of a test: its runtime, its workers' record of
// what they ran, and a way to stop its scheduler before the test ends.
type service struct {
	rt   *runtime.Runtime
	ran  *executions
	ids  *idLog
	stop func()
	logs *syncBuffer
}

// idLog records the occurrence IDs a service's handlers ran.
type idLog struct {
	mu  sync.Mutex
	ids []string
}

func (l *idLog) middleware(s *registry.Schedule, next registry.HandlerFunc) registry.HandlerFunc {
	return func(ctx context.Context, occ registry.Occurrence) error {
		l.mu.Lock()
		l.ids = append(l.ids, occ.ID)
		l.mu.Unlock()
		return next(ctx, occ)
	}
}

func (l *idLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.ids)
}

// startService runs a runtime for schedules (each given the handler that
// records runs in service.ran) and, unless queue is "", an asynq server for
// queue with the runtime's handlers.
func startService(t *testing.T, rdb redis.UniversalClient, opts runtime.Options, queue string, scheds ...registry.Schedule) *service {
	t.Helper()
	svc := &service{ran: newExecutions(), ids: &idLog{}, logs: &syncBuffer{}}
	for i := range scheds {
		scheds[i].Handler = svc.ran.handler
	}
	reg, err := registry.New(scheds...)
	if err != nil {
		t.Fatal(err)
	}
	opts.Redis = rdb
	opts.Logger = slog.New(slog.NewTextHandler(svc.logs, nil))
	if svc.rt, err = runtime.New(reg, opts); err != nil {
		t.Fatal(err)
	}
	if queue != "" {
		startWorker(t, rdb, queue, func(mux *asynq.ServeMux) { svc.rt.RegisterHandlers(mux, svc.ids.middleware) })
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { svc.rt.Run(ctx); close(done) }()
	var once sync.Once
	svc.stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(func() { svc.stop(); svc.rt.Close() })
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("log of %s:\n%s", svc.rt.Replica(), svc.logs.String())
		}
	})
	return svc
}

func everySecond(name, queue, pkg string) registry.Schedule {
	return registry.Schedule{Name: name, Expr: "* * * * * *", Queue: queue, Package: pkg,
		Timeout: 5 * time.Second, MaxRetry: 25}
}

// drained waits until queue holds no task left to run.
func drained(t *testing.T, rdb redis.UniversalClient, queue string) {
	t.Helper()
	insp := asynq.NewInspectorFromRedisClient(rdb)
	waitFor(t, 20*time.Second, "queue "+queue+" to drain", func() bool {
		info, err := insp.GetQueueInfo(queue)
		return err == nil && info.Pending+info.Active+info.Scheduled+info.Retry == 0
	})
}

// checkOnceEach fails unless each slot of name from the first run to the
// last ran exactly once, and returns how many ran.
func checkOnceEach(t *testing.T, who string, runs map[int64]int) int {
	t.Helper()
	if len(runs) == 0 {
		t.Errorf("%s ran nothing", who)
		return 0
	}
	first, last := int64(1<<62), int64(0)
	for slot := range runs {
		first, last = min(first, slot), max(last, slot)
	}
	for slot := first; slot <= last; slot++ {
		if runs[slot] != 1 {
			t.Errorf("%s: slot %d ran %d times, want once (slots %d..%d)", who, slot, runs[slot], first, last)
		}
	}
	return int(last - first + 1)
}

// Two services on one Redis and one queue, each with its own namespace and
// workers and a schedule of the same name: each runs every one of its own
// occurrences once, and none of the other's. A shared task ID would give
// each about half the slots; a worker that ran any occurrence of the
// queue's type would run the other service's with its own handler.
func TestSameScheduleNameInTwoNamespacesOnOneQueue(t *testing.T) {
	t.Parallel()
	rdb := sharedRedis(t)
	queue := uniq("shared")
	var svcs []*service
	for _, name := range []string{"alpha", "beta"} {
		opts := runtime.Options{Namespace: uniq(name), Replica: name, LeaseTTL: 2 * time.Second}
		svcs = append(svcs, startService(t, rdb, opts, queue, everySecond("tick", queue, "example.com/"+name+"/jobs")))
	}
	waitFor(t, 20*time.Second, "five slots run by each service", func() bool {
		return len(svcs[0].ran.slots("tick")) >= 5 && len(svcs[1].ran.slots("tick")) >= 5
	})
	for _, svc := range svcs {
		svc.stop()
	}
	drained(t, rdb, queue)
	for _, svc := range svcs {
		n := checkOnceEach(t, svc.rt.Replica(), svc.ran.slots("tick"))
		prefix := "cron:" + svc.rt.Namespace() + "/tick:"
		for _, id := range svc.ids.all() {
			if !strings.HasPrefix(id, prefix) {
				t.Errorf("%s ran occurrence %s, not one of its own (%s…)", svc.rt.Replica(), id, prefix)
			}
		}
		t.Logf("%s ran %d slots", svc.rt.Replica(), n)
	}
}

// Two services with default options on one Redis: each gets its own
// namespace, so both lead and both run their schedules, even with a
// schedule of the same name.
func TestTwoServicesWithDefaultOptionsShareARedis(t *testing.T) {
	t.Parallel()
	rdb := sharedRedis(t)
	var svcs []*service
	for _, name := range []string{"alpha", "beta"} {
		queue := uniq(name)
		opts := runtime.Options{Replica: name, LeaseTTL: 2 * time.Second}
		svcs = append(svcs, startService(t, rdb, opts, queue, everySecond("tick", queue, uniq("example.com/"+name)+"/jobs")))
	}
	waitFor(t, 20*time.Second, "three slots run by each service", func() bool {
		return len(svcs[0].ran.slots("tick")) >= 3 && len(svcs[1].ran.slots("tick")) >= 3
	})
	if a, b := svcs[0].rt.Namespace(), svcs[1].rt.Namespace(); a == b {
		t.Errorf("both services use namespace %q", a)
	}
	for _, svc := range svcs {
		if !svc.rt.Leadership().Leading() {
			t.Errorf("%s does not lead its own namespace", svc.rt.Replica())
		}
		if h := svc.rt.Health(context.Background()); h.Leader != svc.rt.Replica() {
			t.Errorf("%s's health names leader %q", svc.rt.Replica(), h.Leader)
		}
	}
}

// Two different registries configured with one namespace: the one that led
// first keeps leading, the other does not lead over its cursors, and both
// say so once in their logs and in health. When the owner is gone, the
// other takes the namespace over.
func TestTwoRegistriesContendingForANamespace(t *testing.T) {
	t.Parallel()
	rdb := sharedRedis(t)
	ns := uniq("contended")
	queue := uniq("q")
	opts := func(name string) runtime.Options {
		return runtime.Options{Namespace: ns, Replica: name, LeaseTTL: time.Second}
	}
	owner := startService(t, rdb, opts("owner"), queue, everySecond("owner-tick", queue, "example.com/owner/jobs"))
	waitFor(t, 10*time.Second, "the first service to lead", owner.rt.Leadership().Leading)
	other := startService(t, rdb, opts("other"), queue, everySecond("other-tick", queue, "example.com/other/jobs"))

	waitFor(t, 10*time.Second, "both replicas to report the contention", func() bool {
		return owner.rt.Redis().NamespaceContention() != "" && other.rt.Redis().NamespaceContention() != ""
	})
	// Past the other's first acquire attempts: it still must not lead.
	waitFor(t, 10*time.Second, "two more slots of the owner", func() bool { return len(owner.ran.slots("owner-tick")) >= 3 })
	if other.rt.Leadership().Leading() {
		t.Errorf("the other registry's replica leads over the owner's cursors")
	}
	if n := len(other.ran.slots("other-tick")); n > 0 {
		t.Errorf("the other registry's schedule ran %d slots in the owner's namespace", n)
	}
	for _, svc := range []*service{owner, other} {
		h := svc.rt.Health(context.Background())
		if h.Status != "unhealthy" || !slices.ContainsFunc(h.Problems, func(p string) bool { return strings.Contains(p, "example.com/other/jobs") }) {
			t.Errorf("%s: health %s %q, want unhealthy naming the other registry", svc.rt.Replica(), h.Status, h.Problems)
		}
		if n := strings.Count(svc.logs.String(), "NAMESPACE SHARED BY TWO REGISTRIES"); n != 1 {
			t.Errorf("%s logged the contention %d times, want once", svc.rt.Replica(), n)
		}
	}
	if got := other.rt.Redis().NamespaceContention(); !strings.Contains(got, "does not lead") {
		t.Errorf("the other's report %q does not say it does not lead", got)
	}

	owner.stop()
	waitFor(t, 15*time.Second, "the other registry to take the namespace over", other.rt.Leadership().Leading)
	waitFor(t, 10*time.Second, "a slot of the other's schedule", func() bool { return len(other.ran.slots("other-tick")) > 0 })
	// It led only once the owner's last replica had gone: the takeover of
	// the namespace comes before the lease, though the owner released the
	// lease at once on stopping.
	logs := other.logs.String()
	took, led := strings.Index(logs, "takes the namespace over"), strings.Index(logs, "lease acquired")
	if took < 0 || led < took {
		t.Errorf("the other registry's replica took the lease (at byte %d of its log) before the namespace (at %d)", led, took)
	}
}

// A rolling deploy of one service whose schedules change: the old and the
// new replicas have one registry identity (the same package) though not
// the same schedules, so there is no contention; the schedule both know
// runs once per slot across the handover, and the new one runs once the
// new replica leads — including the slots whose tasks first reached the old
// workers, which lack its handler and bounce them back.
func TestRollingDeployWithChangedSchedulesIsNoContention(t *testing.T) {
	t.Parallel()
	rdb := sharedRedis(t)
	pkg := uniq("example.com/svc") + "/jobs"
	queue := uniq("q")
	old := startService(t, rdb, runtime.Options{Replica: "old", LeaseTTL: time.Second}, queue,
		everySecond("common", queue, pkg), everySecond("retired", queue, pkg))
	waitFor(t, 10*time.Second, "the old replica to lead", old.rt.Leadership().Leading)
	next := startService(t, rdb, runtime.Options{Replica: "next", LeaseTTL: time.Second}, queue,
		everySecond("common", queue, pkg), everySecond("added", queue, pkg))
	if old.rt.Namespace() != next.rt.Namespace() {
		t.Fatalf("one service's replicas derived two namespaces: %q and %q", old.rt.Namespace(), next.rt.Namespace())
	}
	waitFor(t, 10*time.Second, "two slots of common with both replicas up", func() bool {
		return len(old.ran.slots("common"))+len(next.ran.slots("common")) >= 3
	})
	old.stop() // its workers stay up a while, as in a rolling deploy
	waitFor(t, 10*time.Second, "the new replica to lead", next.rt.Leadership().Leading)
	waitFor(t, 20*time.Second, "three slots of the added schedule", func() bool { return len(next.ran.slots("added")) >= 3 })
	next.stop()
	drained(t, rdb, queue)

	for _, svc := range []*service{old, next} {
		if p := svc.rt.Redis().NamespaceContention(); p != "" {
			t.Errorf("%s reports contention in a rolling deploy: %s", svc.rt.Replica(), p)
		}
		if strings.Contains(svc.logs.String(), "NAMESPACE SHARED") {
			t.Errorf("%s logged contention in a rolling deploy", svc.rt.Replica())
		}
	}
	common := old.ran.slots("common")
	for slot, n := range next.ran.slots("common") {
		common[slot] += n
	}
	checkOnceEach(t, "common across the deploy", common)
	checkOnceEach(t, "added", next.ran.slots("added"))
	if n := len(old.ran.slots("added")); n > 0 {
		t.Errorf("the old replica ran the added schedule without its handler: %d", n)
	}
}

// Workers that serve a schedule's queue without its handler bounce its
// occurrences ("handler not found"); the schedule's own service learns of
// it, with which workers and why, in its snapshot and health.
func TestWorkersWithoutTheHandlerAreReported(t *testing.T) {
	t.Parallel()
	rdb := sharedRedis(t)
	queue := uniq("shared")
	// The other service's workers serve the queue from the start; the
	// schedule's own workers only later, so its first occurrences can only
	// reach the others.
	other := startService(t, rdb, runtime.Options{Namespace: uniq("other"), Replica: "other-1", LeaseTTL: time.Second},
		queue, everySecond("other-tick", uniq("elsewhere"), "example.com/other/jobs"))
	owner := startService(t, rdb, runtime.Options{Namespace: uniq("owner"), Replica: "owner-1", LeaseTTL: time.Second},
		"", everySecond("report", queue, "example.com/owner/jobs"))
	owner.rt.CheckQueuesEvery(100 * time.Millisecond)

	var got []runtime.Misrouted
	waitFor(t, 15*time.Second, "the bounce to be reported to the schedule's service", func() bool {
		got, _ = owner.rt.Redis().Misrouted(context.Background())
		return len(got) > 0
	})
	m := got[0]
	if m.Schedule != "report" || m.Queue != queue || m.Namespace != other.rt.Namespace() || m.Replica != "other-1" || !strings.Contains(m.Reason, "no handler") {
		t.Errorf("report %+v; want schedule report on %s bounced by other-1 of %s for want of a handler", m, queue, other.rt.Namespace())
	}
	h := owner.rt.Health(context.Background())
	if h.Status != "unhealthy" || !slices.ContainsFunc(h.Problems, func(p string) bool { return strings.Contains(p, "other-1") }) {
		t.Errorf("health %s %q, want unhealthy naming the workers that bounce", h.Status, h.Problems)
	}
	if !strings.Contains(other.logs.String(), "an occurrence reached workers that cannot run it") {
		t.Errorf("the bouncing workers did not log it")
	}
	waitFor(t, 10*time.Second, "the schedule's leader to log it", func() bool {
		return strings.Contains(owner.logs.String(), "MISROUTED OCCURRENCES")
	})
	// The schedule's own workers start: the bounced occurrences run there.
	startWorker(t, rdb, queue, func(mux *asynq.ServeMux) { owner.rt.RegisterHandlers(mux) })
	waitFor(t, 15*time.Second, "the schedule to run on its own workers", func() bool { return len(owner.ran.slots("report")) >= 2 })
	snap, _ := owner.rt.Monitor().Snapshot(context.Background())
	if len(snap.Misrouted) == 0 {
		t.Errorf("the snapshot does not show the misrouted occurrences")
	}
	if n := strings.Count(owner.logs.String(), "MISROUTED OCCURRENCES"); n != 1 {
		t.Errorf("the leader logged the misrouted occurrences %d times, want once", n)
	}
}

// A replica on the derived default namespace warns, loudly, while a leader
// of an earlier deployment still schedules the same schedules in the old
// default namespace: both run every slot until the old replicas stop.
func TestLiveLeaderInTheLegacyNamespaceIsReported(t *testing.T) {
	t.Parallel()
	rdb := startPrivateRedis(t).Client(t)
	ctx := context.Background()
	pkg := uniq("example.com/svc") + "/jobs"
	// What a replica of the earlier version leaves: a live lease, cursors.
	rdb.Set(ctx, store.KeyPrefix(runtime.NamespaceLegacy)+"lease", "old-1|1", time.Minute)
	rdb.HSet(ctx, store.KeyPrefix(runtime.NamespaceLegacy)+"cursors", "nightly", 1796108100)
	s := idleSchedule()
	s.Package = pkg
	svc := startService(t, rdb, runtime.Options{Replica: "new-1", LeaseTTL: time.Second}, "", s)
	waitFor(t, 10*time.Second, "the warning about the old namespace", func() bool { return svc.rt.Redis().LegacyNamespace() != "" })
	if got := svc.rt.Redis().LegacyNamespace(); !strings.Contains(got, `"belfry"`) || !strings.Contains(got, "nightly") {
		t.Errorf("warning %q does not name the old namespace and the schedule", got)
	}
	if n := strings.Count(svc.logs.String(), "OLD DEFAULT NAMESPACE IN USE"); n != 1 {
		t.Errorf("logged %d times, want once:\n%s", n, svc.logs.String())
	}
	if h := svc.rt.Health(ctx); h.Status != "unhealthy" {
		t.Errorf("health %s while both deployments schedule, want unhealthy", h.Status)
	}

	// A leader in the old namespace that publishes another registry's
	// identity is another service that kept it, not a predecessor.
	rdb.ZAdd(ctx, store.KeyPrefix(runtime.NamespaceLegacy)+"registries", redis.Z{Score: float64(time.Now().UnixMilli()), Member: "example.com/kept/jobs|kept-1"})
	s.Package = uniq("example.com/next") + "/jobs"
	next := startService(t, rdb, runtime.Options{Replica: "next-1", LeaseTTL: time.Second}, "", s)
	waitFor(t, 10*time.Second, "the other service to lead (after its first look)", next.rt.Leadership().Leading)
	if got := next.rt.Redis().LegacyNamespace(); got != "" {
		t.Errorf("warned of another service's leader in the old namespace: %s", got)
	}

}

// The handlers refuse only what another live registry owns: an occurrence
// of a namespace nobody beats in (this service's own, before its Namespace
// changed) and one whose ID names no namespace (enqueued by an earlier
// version) run where they land.
func TestOccurrencesOfNoLiveRegistryStillRun(t *testing.T) {
	t.Parallel()
	rdb := sharedRedis(t)
	queue := uniq("q")
	svc := startService(t, rdb, runtime.Options{Namespace: uniq("now"), Replica: "now-1", LeaseTTL: time.Second},
		queue, registry.Schedule{Name: "nightly", Expr: "17 3 * * *", Queue: queue, Package: "example.com/svc/jobs"})
	client := asynq.NewClientFromRedisClient(rdb)
	slot := time.Date(2026, 11, 29, 3, 17, 0, 0, time.UTC)
	for i, id := range []string{
		(registry.Scope{Namespace: uniq("before"), Schedule: "nightly"}).ID(slot),
		"cron:nightly:" + fmt.Sprint(slot.Add(24*time.Hour).Unix()),
	} {
		occ := registry.Occurrence{Schedule: "nightly", Slot: slot.Add(time.Duration(i) * 24 * time.Hour), Zone: "UTC", ID: id}
		if _, err := client.Enqueue(asynq.NewTask("nightly", registry.EncodeOccurrence(occ)), asynq.Queue(queue), asynq.TaskID(id)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "both occurrences to run", func() bool { return len(svc.ran.slots("nightly")) == 2 })
}

// A Redis user kept out of the old default namespace by its ACL was never
// there: the look for an earlier deployment stops at the first refusal
// instead of filling the ACL log.
func TestLookForTheLegacyNamespaceStopsAtAnACLRefusal(t *testing.T) {
	t.Parallel()
	priv := startPrivateRedis(t)
	admin := priv.Client(t)
	ctx := context.Background()
	s := idleSchedule()
	s.Package = "example.com/acl/jobs"
	reg := registry.MustNew(s)
	ns := runtime.DefaultNamespace(reg)
	if err := admin.Do(ctx, "ACL", "SETUSER", "svc", "on", ">pw", "resetkeys", "~"+store.KeyPrefix(ns)+"*", "~"+ns+":*", "~asynq:*",
		"resetchannels", "&"+store.KeyPrefix(ns)+"lease:released", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Network: "unix", Addr: priv.Socket, Username: "svc", Password: "pw"})
	t.Cleanup(func() { rdb.Close() })
	var logs syncBuffer
	rt, err := runtime.New(reg, runtime.Options{Redis: rdb, Replica: "acl-1", LeaseTTL: time.Second,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	rt.LookForOldNamespaceEvery(0)
	runUntilTheEnd(t, rt)
	waitFor(t, 15*time.Second, "four looks at the namespace", func() bool { return rt.NamespaceChecks() >= 4 })

	entries, err := admin.ACLLog(ctx, 100).Result()
	if err != nil {
		t.Fatal(err)
	}
	// One look reads three keys: each is refused once.
	for _, e := range entries {
		if !strings.HasPrefix(e.Object, runtime.NamespaceLegacy+":") {
			t.Errorf("ACL refused %s %s", e.Context, e.Object)
		} else if e.Count != 1 {
			t.Errorf("ACL refused %s %d times, want once", e.Object, e.Count)
		}
	}
	if len(entries) == 0 {
		t.Errorf("the ACL refused nothing: the old namespace was not looked at")
	}
	if n := strings.Count(logs.String(), "may not read the old default namespace"); n != 1 {
		t.Errorf("logged the refusal %d times, want once:\n%s", n, logs.String())
	}
	if got := rt.Redis().LegacyNamespace(); got != "" {
		t.Errorf("warned %q without reading the old namespace", got)
	}
}
