package redistest_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/belfry/belfry/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// A started cluster spreads its slots over every master: a cluster client
// writes keys that land on different nodes, and a multi-key command over
// two slots is refused with CROSSSLOT, as on any Redis Cluster.
func TestClusterSpreadsSlots(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := redistest.StartCluster(t, 3)
	rdb := c.Client(t)
	holders := map[string]bool{}
	for _, key := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		if err := rdb.Set(ctx, key, "v", 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", key, err)
		}
		node, err := rdb.MasterForKey(ctx, key)
		if err != nil {
			t.Fatalf("master for %s: %v", key, err)
		}
		holders[node.Options().Addr] = true
	}
	if len(holders) < 2 {
		t.Errorf("eight keys landed on %v; want them spread over the masters", holders)
	}
	node := redis.NewClient(&redis.Options{Addr: c.Addrs()[0]})
	defer node.Close()
	if err := node.MGet(ctx, "a", "b").Err(); err == nil || !strings.HasPrefix(err.Error(), "CROSSSLOT") {
		t.Errorf("MGET a b on one node: %v; want CROSSSLOT", err)
	}
	c.Close()
	for _, addr := range c.Addrs() {
		if conn, err := net.Dial("tcp", addr); err == nil {
			conn.Close()
			t.Errorf("node %s accepts connections after Close", addr)
		}
	}
}
