package redistest_test

import (
	"context"
	"testing"

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
