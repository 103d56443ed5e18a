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

// startTestCluster starts a cluster of three masters for a parallel test,
// with a context that bounds the test.
func startTestCluster(t *testing.T) (context.Context, *redistest.Cluster) {
	t.Helper()
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx, redistest.StartCluster(t, 3)
}

// spreadKeys are keys whose slots are spread over a new cluster's three
// masters.
var spreadKeys = []string{"a", "b", "c", "d", "e", "f", "g", "h"}

// A started cluster spreads its slots over every master: a cluster client
// writes keys that land on different nodes, and a multi-key command over
// two slots is refused with CROSSSLOT, as on any Redis Cluster.
func TestClusterSpreadsSlots(t *testing.T) {
	ctx, c := startTestCluster(t)
	rdb := c.Client(t)
	holders := map[string]bool{}
	for _, key := range spreadKeys {
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

// A client built from a link's routes, as another process builds it,
// reaches every master only through the link: cut, it reaches none;
// healed, it reaches them again; slowed, its replies come late. OtherMaster names the master that holds
// neither of two keys on different masters.
func TestRoutedClusterClientGoesThroughItsLink(t *testing.T) {
	ctx, c := startTestCluster(t)
	link := c.NewLink(t)
	if _, err := redistest.RoutedClusterClient("127.0.0.1:1", redis.ClusterOptions{}); err == nil {
		t.Error("a route without its proxy accepted")
	}
	rdb, err := redistest.RoutedClusterClient(link.Routes(), redis.ClusterOptions{
		DialTimeout: 200 * time.Millisecond, ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	keys := spreadKeys
	set := func() error {
		for _, key := range keys {
			if err := rdb.Set(ctx, key, "v", 0).Err(); err != nil {
				return err
			}
		}
		return nil
	}
	if err := set(); err != nil {
		t.Fatalf("through the link: %v", err)
	}
	link.BlackHole()
	if err := set(); err == nil {
		t.Error("every SET answered through a cut link")
	}
	link.Pass()
	redistest.WaitFor(t, 10*time.Second, "the healed link to answer", func() bool { return set() == nil })
	link.Delay(300 * time.Millisecond)
	began := time.Now()
	if err := rdb.Get(ctx, keys[0]).Err(); err != nil {
		t.Errorf("GET through a slow link: %v", err)
	} else if took := time.Since(began); took < 300*time.Millisecond {
		t.Errorf("GET through a link delaying replies 300ms answered in %s", took)
	}
	link.Pass()

	var apart [2]string
	first, _, err := c.MasterOf(ctx, keys[0])
	if err != nil {
		t.Fatal(err)
	}
	apart[0] = keys[0]
	for _, key := range keys[1:] {
		if m, _, err := c.MasterOf(ctx, key); err == nil && m != first {
			apart[1] = key
			break
		}
	}
	if apart[1] == "" {
		t.Fatalf("keys %q all on %s", keys, first.Addr)
	}
	other, err := c.OtherMaster(ctx, apart[:]...)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range apart {
		if m, _, _ := c.MasterOf(ctx, key); m == other {
			t.Errorf("OtherMaster of %q is %s, the master of %q", apart, other.Addr, key)
		}
	}
}
