package redistest

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a Redis Cluster of the test's own: nodes (redis-server
// --cluster-enabled yes on 127.0.0.1 ports, each also on a unix socket in
// its directory) whose slots redis-cli --cluster create spreads among the
// masters, each with its replicas if asked for.
type Cluster struct {
	Dir string
	// Masters are the nodes that held slots when the cluster started; a
	// failover (Failover, KillMasterOf) makes one of their replicas
	// master in its place.
	Masters []*Private
	// Nodes are every node, masters and replicas.
	Nodes []*Private
}

// StartCluster starts a cluster of masters nodes (at least 3, as
// redis-cli --cluster create asks), without replicas, in a temporary
// directory, stopped when the test ends. A missing redis-server or
// redis-cli fails the test.
func StartCluster(t testing.TB, masters int) *Cluster {
	t.Helper()
	return StartClusterWithReplicas(t, masters, 0)
}

// StartClusterWithReplicas is StartCluster with replicas replicas of each
// master, for failovers.
func StartClusterWithReplicas(t testing.TB, masters, replicas int) *Cluster {
	t.Helper()
	c := NewCluster(t, t.TempDir(), masters, replicas)
	t.Cleanup(c.Close)
	return c
}

// NewCluster starts a cluster with its files under dir (a directory per
// node) and waits until every node reports every slot served and every
// replica is in sync; stopping it (Close) is the caller's job. It fails
// through t; a program that is not a test gives a TB of its own.
func NewCluster(t TB, dir string, masters, replicas int) *Cluster {
	t.Helper()
	needCommands(t, "redis-server", "redis-cli")
	if masters < 3 {
		t.Fatalf("a cluster of %d masters: redis-cli --cluster create needs at least 3", masters)
	}
	c := &Cluster{Dir: dir}
	for i := range masters * (1 + replicas) {
		p := &Private{t: t, Dir: filepath.Join(dir, "node"+strconv.Itoa(i)), Addr: freePort(t)}
		p.Socket = filepath.Join(p.Dir, "redis.sock")
		p.config = filepath.Join(p.Dir, "redis.conf")
		// The bus port is the client port + 10000 unless named, which a
		// free port near the top of the range cannot have.
		_, busPort, _ := net.SplitHostPort(freePort(t))
		writeConfig(t, p.config, []string{
			"cluster-enabled yes",
			"cluster-config-file " + filepath.Join(p.Dir, "nodes.conf"),
			"cluster-port " + busPort,
			"cluster-node-timeout 2000",
			// A replica whose master is gone takes over however long ago it
			// last heard from it: the tests kill masters on purpose.
			"cluster-replica-validity-factor 0",
			// A replica's full sync starts at once instead of after Redis's
			// default 5 s, as in a Sentinel topology (SentinelOptions's
			// ResyncDelay): a replica, first joined or demoted, is in sync
			// within moments.
			"repl-diskless-sync-delay 0",
		})
		p.Start()
		c.Nodes = append(c.Nodes, p)
	}
	args := []string{"--cluster", "create"}
	for _, p := range c.Nodes {
		args = append(args, p.Addr)
	}
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		c.Close()
		t.Fatalf("redis-cli %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.waitServed(ctx); err != nil {
		c.Close()
		t.Fatalf("cluster in %s not ready: %v", dir, err)
	}
	for _, p := range c.Nodes {
		if role, err := c.role(ctx, p); err != nil {
			c.Close()
			t.Fatalf("cluster in %s: %v", dir, err)
		} else if role == "master" {
			c.Masters = append(c.Masters, p)
		}
	}
	// A replica not yet in sync acknowledges nothing: a test's first
	// acknowledged write would wait out its timeout.
	if err := c.WaitSynced(ctx); err != nil {
		c.Close()
		t.Fatalf("cluster in %s: %v", dir, err)
	}
	return c
}

// Addrs returns the starting masters' "127.0.0.1:<port>" addresses.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.Masters))
	for i, p := range c.Masters {
		addrs[i] = p.Addr
	}
	return addrs
}

// Client returns a cluster client of it (redis.NewClusterClient), closed
// when the test ends.
func (c *Cluster) Client(t testing.TB) *redis.ClusterClient {
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(),
		DialTimeout: 200 * time.Millisecond, ReadTimeout: time.Second, WriteTimeout: time.Second})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// Close stops every node (SIGTERM to each process it started).
func (c *Cluster) Close() {
	for _, p := range c.Nodes {
		p.Stop()
	}
}

// waitServed waits until every node says the cluster is ok with all 16384
// slots assigned and served: redis-cli returns once the nodes agree on
// the configuration, which each node then has to adopt.
func (c *Cluster) waitServed(ctx context.Context) error {
	for _, p := range c.Nodes {
		if !p.Running() {
			continue
		}
		rdb := redis.NewClient(&redis.Options{Network: "unix", Addr: p.Socket, DialTimeout: 200 * time.Millisecond})
		var info string
		var err error
		for {
			info, err = rdb.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_slots_ok:16384") {
				break
			}
			if !sleepCtx(ctx, 20*time.Millisecond) {
				rdb.Close()
				return fmt.Errorf("node %s: CLUSTER INFO %q, %v (%w)", p.Addr, info, err, ctx.Err())
			}
		}
		rdb.Close()
	}
	return nil
}
