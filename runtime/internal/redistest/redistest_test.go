package redistest_test

import (
	"context"
	"testing"
	"time"

	"github.com/belfry/belfry/runtime/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// A TCP private server keeps its address and its data across a restart.
func TestPrivateTCPKeepsItsAddressAcrossRestarts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	priv := redistest.StartPrivateTCP(t)
	rdb := redis.NewClient(&redis.Options{Addr: priv.Addr})
	defer rdb.Close()
	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET over TCP at %s: %v", priv.Addr, err)
	}
	priv.Stop()
	priv.Start()
	if got, err := rdb.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("after a restart GET over TCP = %q, %v; want v", got, err)
	}
	if got := get(t, priv.Client(t), "k"); got != "v" {
		t.Errorf("over the unix socket k = %q, want v", got)
	}
}

// A command sent on a fresh connection right after Stall returns is served
// only when the stall ends: tests rely on "after Stall, Redis is stalled",
// not on a probe's timeout that a loaded machine can fake.
func TestACommandSentAfterStallWaitsForIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	priv := redistest.StartPrivate(t)
	rdb := redis.NewClient(&redis.Options{Network: "unix", Addr: priv.Socket, ReadTimeout: 10 * time.Second, MaxRetries: -1})
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	const stall = 2 * time.Second
	began := time.Now()
	priv.Stall(t, stall)
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	// began precedes the sleep, so a ping that waited for the sleep is
	// served at least the whole stall after began.
	if served := time.Since(began); served < stall {
		t.Errorf("a ping sent after Stall(%s) was served %s after the stall began", stall, served.Round(time.Millisecond))
	}
}
