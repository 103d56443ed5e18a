package lease

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/belfry/belfry/internal/redistest"
	"github.com/belfry/belfry/runtime/internal/clock"
	"github.com/belfry/belfry/runtime/internal/store"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testBundle is n leases of one namespace on the shared Redis, each on its
// own stub clock so the trust window moves only when a test says.
type testBundle struct {
	rdb    redis.UniversalClient
	keys   store.Keys
	leases []*Lease
	clocks []*clock.Stub
}

func setup(t *testing.T, n int, ttl time.Duration) *testBundle {
	t.Helper()
	b := &testBundle{rdb: redistest.Shared(t), keys: store.NewKeys(redistest.Uniq("lease"))}
	for i := range n {
		clk := clock.NewStub(time.Now())
		b.clocks = append(b.clocks, clk)
		b.leases = append(b.leases, New(Config{Redis: b.rdb, Keys: b.keys, Replica: "r" + strconv.Itoa(i), TTL: ttl, Clock: clk}))
	}
	return b
}

func token(t *testing.T, value string) int64 {
	t.Helper()
	_, tok := ParseValue(value)
	if tok == 0 {
		t.Fatalf("lease value %q has no token", value)
	}
	return tok
}

// signalled reports whether ch has a signal waiting, and drains it.
func signalled(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestAcquireRenewExpireRelease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const ttl = time.Second
	bundle := setup(t, 2, ttl)
	a, b := bundle.leases[0], bundle.leases[1]

	if _, err := a.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	aValue, ok := a.Current()
	if !ok || !strings.HasPrefix(aValue, "r0|") {
		t.Fatalf("a holds %q (trusted %v), want r0|<token>", aValue, ok)
	}
	if !signalled(a.Changed()) {
		t.Error("gaining the lease did not signal Changed")
	}
	wait, err := b.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Current(); ok {
		t.Fatal("b acquired a lease a holds")
	}
	if wait <= 0 || wait > ttl+10*time.Millisecond {
		t.Errorf("b's next attempt in %s; want within the holder's remaining TTL %s", wait, ttl)
	}
	if _, err := a.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	if v, ok := a.Current(); !ok || v != aValue {
		t.Fatalf("after renew a holds %q (%v), want %q", v, ok, aValue)
	}

	// a stops renewing (it crashed); b takes over once the key expires.
	redistest.WaitFor(t, 3*ttl, "b to take over the expired lease", func() bool {
		b.Acquire(ctx)
		_, ok := b.Current()
		return ok
	})
	bValue, _ := b.Current()
	if token(t, bValue) <= token(t, aValue) {
		t.Errorf("fencing token did not grow: a %q, b %q", aValue, bValue)
	}
	// a's clock has not moved: it still trusts its lease, as a paused
	// process would. Its next renewal is refused, so it steps down.
	if _, err := a.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := a.Current(); ok {
		t.Error("a leads after its renewal was refused")
	}
	// a's release must not delete b's lease (compare-and-DEL).
	a.Release(ctx)
	h, err := Observe(ctx, bundle.rdb, bundle.keys, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if h.Replica != "r1" || h.Token != token(t, bValue) {
		t.Fatalf("after a's release the holder is %q token %d, want r1 %d", h.Replica, h.Token, token(t, bValue))
	}
	b.Release(ctx)
	if h, _ = Observe(ctx, bundle.rdb, bundle.keys, time.Minute); h.Replica != "" {
		t.Errorf("after b's release the holder is %q, want none", h.Replica)
	}
}

// The trust window ends TTL minus the margin after the acquire was sent, by
// the holder's own clock, whatever Redis says.
func TestTrustWindowEndsBeforeTheKeyExpires(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const ttl = 10 * time.Second
	bundle := setup(t, 1, ttl)
	l, clk := bundle.leases[0], bundle.clocks[0]
	if _, err := l.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	signalled(l.Changed())
	clk.Advance(ttl - l.TrustMargin() - time.Millisecond)
	if _, ok := l.Current(); !ok {
		t.Fatal("the holder stopped trusting its lease before the trust window ended")
	}
	clk.Advance(2 * time.Millisecond)
	if _, ok := l.Current(); ok {
		t.Fatal("the holder trusts its lease past TTL minus the margin")
	}
	// The key still lives in Redis (real time barely moved): the renewal
	// succeeds, restores trust and wakes the scheduler, which stood down.
	if _, err := l.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := l.Current(); !ok {
		t.Fatal("a successful renewal did not restore trust")
	}
	if !signalled(l.Changed()) {
		t.Error("restoring a lapsed trust window did not signal Changed")
	}
}

// A holder that stepped down after a transient error resumes its own lease
// if nobody took it meanwhile, keeping its token.
func TestResumesItsOwnLeaseAfterAStepDown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := setup(t, 1, 5*time.Second).leases[0]
	l.Acquire(ctx)
	before, _ := l.Current()
	l.StepDown("injected: renewal failed")
	if _, ok := l.Current(); ok {
		t.Fatal("still leading after StepDown")
	}
	if _, err := l.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	after, ok := l.Current()
	if !ok || after != before {
		t.Errorf("after resuming the holder has %q (%v), want its old lease %q", after, ok, before)
	}
}
