package redistest_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/belfry/belfry/internal/redistest"
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

// A command sent right after Stall returns, on a connection Redis served
// before, is answered only when the stall ends: tests rely on "after
// Stall, Redis is stalled", not on a probe's timeout that a loaded machine
// can fake. Here Redis is stopped while Stall starts, as a loaded machine
// may keep it from running: Stall must not return before the sleep is
// queued ahead of that command.
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
	priv.Pause()
	var resumed atomic.Int64
	time.AfterFunc(300*time.Millisecond, func() { // the probe gives up after 50 ms
		resumed.Store(time.Now().UnixNano())
		priv.Resume()
	})
	priv.Stall(t, stall)
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	// The sleep began after Redis was resumed, so a ping that waited for
	// it is served at least the whole stall after that.
	if served := time.Since(time.Unix(0, resumed.Load())); resumed.Load() == 0 || served < stall {
		t.Errorf("a ping sent after Stall(%s) was served %s after Redis resumed", stall, served.Round(time.Millisecond))
	}
}
