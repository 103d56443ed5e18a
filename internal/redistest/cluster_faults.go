package redistest

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/belfry/belfry/internal/netfault"
	"github.com/redis/go-redis/v9"
)

// nodeClient is a plain client of one node, on its socket.
func nodeClient(p *Private) *redis.Client {
	return redis.NewClient(&redis.Options{Network: "unix", Addr: p.Socket, DialTimeout: 200 * time.Millisecond})
}

// role is a node's INFO role: "master" or "slave".
func (c *Cluster) role(ctx context.Context, p *Private) (string, error) {
	rdb := nodeClient(p)
	defer rdb.Close()
	for {
		fields, err := rdb.Info(ctx, "replication").Result()
		if err == nil {
			return infoFields(fields)["role"], nil
		}
		if !sleepCtx(ctx, 20*time.Millisecond) {
			return "", fmt.Errorf("node %s: INFO replication: %w", p.Addr, err)
		}
	}
}

// MastersNow returns the running nodes that are masters now: after a
// failover, the promoted replica instead of the master it replaced.
func (c *Cluster) MastersNow(ctx context.Context) ([]*Private, error) {
	var masters []*Private
	for _, p := range c.Nodes {
		if !p.Running() {
			continue
		}
		role, err := c.role(ctx, p)
		if err != nil {
			return nil, err
		}
		if role == "master" {
			masters = append(masters, p)
		}
	}
	return masters, nil
}

// node is the node at addr ("127.0.0.1:<port>"), nil if none.
func (c *Cluster) node(addr string) *Private {
	for _, p := range c.Nodes {
		if p.Addr == addr {
			return p
		}
	}
	return nil
}

// KeySlot is the slot of key.
func (c *Cluster) KeySlot(ctx context.Context, key string) (int, error) {
	for _, p := range c.Nodes {
		if !p.Running() {
			continue
		}
		rdb := nodeClient(p)
		n, err := rdb.ClusterKeySlot(ctx, key).Result()
		rdb.Close()
		return int(n), err
	}
	return 0, fmt.Errorf("no node runs")
}

// slotView is what one node says of a slot (CLUSTER NODES: CLUSTER
// SLOTS leaves out a replica that has replicated nothing yet): its
// master, and the master's replicas not marked failing.
func (c *Cluster) slotView(ctx context.Context, from *Private, slot int) (master *Private, replicas []*Private, err error) {
	rdb := nodeClient(from)
	defer rdb.Close()
	text, err := rdb.ClusterNodes(ctx).Result()
	if err != nil {
		return nil, nil, err
	}
	type line struct{ id, addr, flags, masterID string }
	var lines []line
	masterID := ""
	for l := range strings.Lines(text) {
		f := strings.Fields(l)
		if len(f) < 8 {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		lines = append(lines, line{id: f[0], addr: addr, flags: f[2], masterID: f[3]})
		if !strings.Contains(f[2], "master") || strings.Contains(f[2], "fail") {
			continue
		}
		for _, r := range f[8:] {
			if strings.HasPrefix(r, "[") {
				continue // a slot being migrated or imported
			}
			lo, hi, isRange := strings.Cut(r, "-")
			if !isRange {
				hi = lo
			}
			a, _ := strconv.Atoi(lo)
			b, _ := strconv.Atoi(hi)
			if slot >= a && slot <= b {
				master, masterID = c.node(addr), f[0]
			}
		}
	}
	if masterID == "" {
		return nil, nil, fmt.Errorf("node %s: slot %d is not served", from.Addr, slot)
	}
	if master == nil {
		return nil, nil, fmt.Errorf("node %s names a node not of this cluster master of slot %d", from.Addr, slot)
	}
	for _, l := range lines {
		if l.masterID == masterID && !strings.Contains(l.flags, "fail") {
			if p := c.node(l.addr); p != nil {
				replicas = append(replicas, p)
			}
		}
	}
	return master, replicas, nil
}

// MasterOf returns the master serving key's slot and its replicas, as
// every running node agrees, waiting until they do.
func (c *Cluster) MasterOf(ctx context.Context, key string) (master *Private, replicas []*Private, err error) {
	slot, err := c.KeySlot(ctx, key)
	if err != nil {
		return nil, nil, err
	}
	return c.waitSlot(ctx, slot, func(*Private) bool { return true })
}

// waitSlot waits until every running node names the same master of slot,
// one ok accepts and that itself says it is a master.
func (c *Cluster) waitSlot(ctx context.Context, slot int, ok func(*Private) bool) (master *Private, replicas []*Private, err error) {
	for {
		master, replicas, err = c.agreedSlot(ctx, slot)
		if err == nil && !ok(master) {
			err = fmt.Errorf("slot %d still on %s", slot, master.Addr)
		}
		if err == nil {
			var role string
			if role, err = c.role(ctx, master); err == nil && role != "master" {
				err = fmt.Errorf("%s, named master of slot %d, says it is a %s", master.Addr, slot, role)
			}
		}
		if err == nil {
			return master, replicas, nil
		}
		if !sleepCtx(ctx, 50*time.Millisecond) {
			return nil, nil, fmt.Errorf("%w (%w)", err, ctx.Err())
		}
	}
}

func (c *Cluster) agreedSlot(ctx context.Context, slot int) (master *Private, replicas []*Private, err error) {
	for _, p := range c.Nodes {
		if !p.Running() {
			continue
		}
		m, rs, err := c.slotView(ctx, p, slot)
		if err != nil {
			return nil, nil, err
		}
		if master != nil && m != master {
			return nil, nil, fmt.Errorf("nodes disagree on slot %d: %s and %s", slot, master.Addr, m.Addr)
		}
		master, replicas = m, rs
	}
	if master == nil {
		return nil, nil, fmt.Errorf("no node runs")
	}
	return master, replicas, nil
}

// Failover has a replica of the master of key's slot take over with
// CLUSTER FAILOVER (the graceful form: the replica first catches up) and
// waits until every node names it master of the slot. It returns the old
// master and the new.
func (c *Cluster) Failover(ctx context.Context, key string) (old, promoted *Private, err error) {
	old, replicas, err := c.MasterOf(ctx, key)
	if err != nil {
		return nil, nil, err
	}
	if len(replicas) == 0 {
		return nil, nil, fmt.Errorf("the master %s of %q has no replica to fail over to", old.Addr, key)
	}
	promoted = replicas[0]
	rdb := nodeClient(promoted)
	err = rdb.ClusterFailover(ctx).Err()
	rdb.Close()
	if err != nil {
		return nil, nil, fmt.Errorf("CLUSTER FAILOVER on %s: %w", promoted.Addr, err)
	}
	slot, _ := c.KeySlot(ctx, key)
	if _, _, err := c.waitSlot(ctx, slot, func(m *Private) bool { return m == promoted }); err != nil {
		return nil, nil, err
	}
	return old, promoted, nil
}

// KillMasterOf kills the master of key's slot with SIGKILL and waits
// until a replica of it is master of the slot in every running node's
// view. It returns the killed master and the new one.
func (c *Cluster) KillMasterOf(ctx context.Context, key string) (killed, promoted *Private, err error) {
	killed, replicas, err := c.MasterOf(ctx, key)
	if err != nil {
		return nil, nil, err
	}
	if len(replicas) == 0 {
		return nil, nil, fmt.Errorf("the master %s of %q has no replica to take over", killed.Addr, key)
	}
	killed.Kill()
	slot, _ := c.KeySlot(ctx, key)
	promoted, _, err = c.waitSlot(ctx, slot, func(m *Private) bool { return m != killed })
	return killed, promoted, err
}

// MigrateSlotOf moves key's slot to the master to, as redis-cli --cluster
// reshard does: the slot IMPORTING on to and MIGRATING on its master,
// its keys MIGRATEd in batches (clients meanwhile redirected with ASK for
// keys already moved, or refused with TRYAGAIN for a command over keys on
// both sides), then the slot assigned to to on every master. between, if
// not nil, runs after each batch. It returns the slot's old master.
func (c *Cluster) MigrateSlotOf(ctx context.Context, key string, to *Private, between func()) (from *Private, err error) {
	slot, err := c.KeySlot(ctx, key)
	if err != nil {
		return nil, err
	}
	from, _, err = c.MasterOf(ctx, key)
	if err != nil {
		return nil, err
	}
	if from == to {
		return nil, fmt.Errorf("slot %d is on %s already", slot, to.Addr)
	}
	src, dst := nodeClient(from), nodeClient(to)
	defer src.Close()
	defer dst.Close()
	srcID, err := src.ClusterMyID(ctx).Result()
	if err != nil {
		return nil, err
	}
	dstID, err := dst.ClusterMyID(ctx).Result()
	if err != nil {
		return nil, err
	}
	if err := dst.Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", srcID).Err(); err != nil {
		return nil, fmt.Errorf("SETSLOT IMPORTING on %s: %w", to.Addr, err)
	}
	if err := src.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", dstID).Err(); err != nil {
		return nil, fmt.Errorf("SETSLOT MIGRATING on %s: %w", from.Addr, err)
	}
	host, port, _ := net.SplitHostPort(to.Addr)
	for {
		keys, err := src.ClusterGetKeysInSlot(ctx, slot, 5).Result()
		if err != nil {
			return nil, fmt.Errorf("GETKEYSINSLOT on %s: %w", from.Addr, err)
		}
		if len(keys) == 0 {
			break
		}
		args := []any{"MIGRATE", host, port, "", 0, 5000, "REPLACE", "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		if err := src.Do(ctx, args...).Err(); err != nil {
			return nil, fmt.Errorf("MIGRATE from %s: %w", from.Addr, err)
		}
		if between != nil {
			between()
		}
	}
	// The new owner first, then the old, then the rest, as redis-cli does.
	for _, p := range append([]*Private{to, from}, c.Nodes...) {
		if !p.Running() {
			continue
		}
		rdb := nodeClient(p)
		err := rdb.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", dstID).Err()
		rdb.Close()
		if err != nil && !strings.Contains(err.Error(), "only with masters") {
			return nil, fmt.Errorf("SETSLOT NODE on %s: %w", p.Addr, err)
		}
	}
	if _, _, err := c.waitSlot(ctx, slot, func(m *Private) bool { return m == to }); err != nil {
		return nil, err
	}
	return from, nil
}

// WaitSynced waits until every running replica's link to its master is
// up and its offset caught up with the master's.
func (c *Cluster) WaitSynced(ctx context.Context) error {
	for _, p := range c.Nodes {
		if !p.Running() {
			continue
		}
		for {
			fields, err := info(ctx, p)
			if err == nil && (fields["role"] == "master" || fields["master_link_status"] == "up") {
				break
			}
			if !sleepCtx(ctx, 20*time.Millisecond) {
				return fmt.Errorf("replica %s not in sync: %v %v (%w)", p.Addr, fields["master_link_status"], err, ctx.Err())
			}
		}
	}
	return nil
}

// OtherMaster returns a running master that serves none of keys' slots,
// e.g. where to move a slot so that it stays apart from others.
func (c *Cluster) OtherMaster(ctx context.Context, keys ...string) (*Private, error) {
	taken := map[*Private]bool{}
	for _, k := range keys {
		m, _, err := c.MasterOf(ctx, k)
		if err != nil {
			return nil, err
		}
		taken[m] = true
	}
	for _, p := range c.Nodes {
		if !p.Running() || taken[p] {
			continue
		}
		if role, err := c.role(ctx, p); err != nil {
			return nil, err
		} else if role == "master" {
			return p, nil
		}
	}
	return nil, fmt.Errorf("no master serves none of %q", keys)
}

// ClusterLink is a cluster client's way to every node through a proxy of
// its own per node (netfault), which the test cuts and heals as a whole:
// the cluster names its nodes by their real addresses, and the client's
// dialer sends each connection through that node's proxy.
type ClusterLink struct {
	t       testing.TB
	mu      sync.Mutex
	proxies map[string]*netfault.Proxy
	holed   bool
	delay   time.Duration
}

// LinkedClient returns a cluster client whose connections go through a
// ClusterLink, closed when the test ends.
func (c *Cluster) LinkedClient(t testing.TB) (*redis.ClusterClient, *ClusterLink) {
	link := &ClusterLink{t: t, proxies: map[string]*netfault.Proxy{}}
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(),
		DialTimeout: 200 * time.Millisecond, ReadTimeout: time.Second, WriteTimeout: time.Second,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", link.proxy(addr).Addr())
		}})
	t.Cleanup(func() { rdb.Close() })
	return rdb, link
}

// NewLink returns a ClusterLink with a proxy started for every node, for
// a client in another process: Routes tells it where each node's proxy
// listens.
func (c *Cluster) NewLink(t testing.TB) *ClusterLink {
	link := &ClusterLink{t: t, proxies: map[string]*netfault.Proxy{}}
	for _, p := range c.Nodes {
		link.proxy(p.Addr)
	}
	return link
}

// Routes lists the link's proxies as "<node addr>=<proxy addr>" pairs
// joined by commas (see RoutedClusterClient).
func (l *ClusterLink) Routes() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var pairs []string
	for addr, p := range l.proxies {
		pairs = append(pairs, addr+"="+p.Addr())
	}
	slices.Sort(pairs)
	return strings.Join(pairs, ",")
}

// RoutedClusterClient returns a cluster client whose connection to each
// node goes to that node's proxy as routes (ClusterLink.Routes) name it;
// a node not named there is refused, so that no connection bypasses the
// link. Closing it is the caller's job.
func RoutedClusterClient(routes string, opts redis.ClusterOptions) (*redis.ClusterClient, error) {
	via := map[string]string{}
	for pair := range strings.SplitSeq(routes, ",") {
		node, proxy, ok := strings.Cut(pair, "=")
		if !ok {
			return nil, fmt.Errorf("route %q: want <node addr>=<proxy addr>", pair)
		}
		via[node] = proxy
		opts.Addrs = append(opts.Addrs, node)
	}
	opts.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		proxy, ok := via[addr]
		if !ok {
			return nil, fmt.Errorf("no route to cluster node %s", addr)
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", proxy)
	}
	return redis.NewClusterClient(&opts), nil
}

// proxy is the link's proxy of the node at addr, started on first use.
func (l *ClusterLink) proxy(addr string) *netfault.Proxy {
	l.mu.Lock()
	defer l.mu.Unlock()
	p, ok := l.proxies[addr]
	if !ok {
		p = netfault.New(l.t, "tcp", addr)
		if l.holed {
			p.BlackHole()
		}
		if l.delay > 0 {
			p.Delay(l.delay)
		}
		l.proxies[addr] = p
	}
	return p
}

// BlackHole partitions the client from every node (netfault.Proxy's).
func (l *ClusterLink) BlackHole() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.holed = true
	for _, p := range l.proxies {
		p.BlackHole()
	}
}

// Delay holds every node's replies for d (netfault.Proxy's; 0 removes
// the latency).
func (l *ClusterLink) Delay(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.delay = d
	for _, p := range l.proxies {
		p.Delay(d)
	}
}

// Pass ends the partition and the latency.
func (l *ClusterLink) Pass() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.holed, l.delay = false, 0
	for _, p := range l.proxies {
		p.Pass()
	}
}
