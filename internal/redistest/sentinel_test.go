package redistest_test

import (
	"context"
	"testing"
	"time"

	"github.com/belfry/belfry/internal/redistest"
)

// A forced failover and a SIGKILL of the primary each move the primary;
// a failover client follows, and what replicas acknowledged survives both.
func TestSentinelFailoverAndKill(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	s := redistest.StartSentinel(t, redistest.SentinelOptions{})
	rdb := s.Client(t)
	write := func(key string) {
		t.Helper()
		if err := rdb.Set(ctx, key, "v", 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", key, err)
		}
		if n, err := rdb.Do(ctx, "WAIT", 1, 5000).Int(); err != nil || n != 1 {
			t.Fatalf("WAIT after SET %s = %d, %v; want 1 replica", key, n, err)
		}
	}
	write("before")

	old, err := s.Failover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := s.Primary(ctx); err != nil || p == old {
		t.Fatalf("after Failover the primary is %v (%v); want a server other than %s", p, err, old.Addr)
	}
	if err := s.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	write("after-failover")

	killed, err := s.KillPrimary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.WaitNewPrimary(ctx, killed); err != nil {
		t.Fatal(err)
	}
	killed.Start()
	if err := s.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"before", "after-failover"} {
		if got, err := rdb.Get(ctx, key).Result(); err != nil || got != "v" {
			t.Errorf("GET %s after failover and kill = %q, %v; want v", key, got, err)
		}
	}
}

// A failover the sentinel gives up on — the replica it picked did not turn
// primary within failover-timeout (3 s here), as a stalled or overloaded
// replica may not — is asked for again: Failover returns once a replica is
// primary, instead of waiting for a new primary until its context ends.
func TestFailoverAsksAgainAfterTheSentinelAbortsIt(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	s := redistest.StartSentinel(t, redistest.SentinelOptions{})
	replica := s.Servers[1]
	replica.Pause()
	t.Cleanup(replica.Resume) // a no-op once resumed
	// The replica is resumed once the sentinel has started the failover
	// and then given it up.
	watched := make(chan error, 1)
	go func() {
		err := s.WaitFailoverAbort(ctx)
		replica.Resume()
		watched <- err
	}()
	old, err := s.Failover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-watched; err != nil {
		t.Fatal(err)
	}
	if p, err := s.Primary(ctx); err != nil || p == old {
		t.Fatalf("after Failover the primary is %v (%v); want a server other than %s", p, err, old.Addr)
	}
}
