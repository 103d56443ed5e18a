package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelMasterName is the name the sentinels monitor the primary under.
const SentinelMasterName = "belfry"

// SentinelOptions shape a Sentinel topology. The zero value is a primary,
// one replica and three sentinels.
type SentinelOptions struct {
	// Replicas is the number of replicas of the primary; default 1.
	Replicas int
	// Sentinels is the number of redis-sentinel processes; default 3,
	// with a quorum of a majority.
	Sentinels int
	// MinReplicasToWrite sets min-replicas-to-write on every server (with
	// min-replicas-max-lag 5), so a primary that lost its replicas refuses
	// writes; 0 leaves it off, as Redis does.
	MinReplicasToWrite int
	// ResyncDelay is the servers' repl-diskless-sync-delay: how long a
	// primary waits before it starts a replica's full resync. 0 (the
	// default here) starts it at once, so a demoted primary catches up
	// within moments; Redis's own default is 5 s, in which a demoted
	// primary promoted again still lacks what the other took meanwhile.
	ResyncDelay time.Duration
}

// Sentinel is a Sentinel-managed Redis of the test's own: a primary and
// its replicas (redis-server on 127.0.0.1 ports, each also on a unix socket
// in its directory) and redis-sentinel processes monitoring them under
// SentinelMasterName. Its timeouts are small (a primary is down after 1 s
// without a reply), so a failover takes a second or two, not a minute.
//
// Servers keep their config files: the role Sentinel gives a server
// survives a restart of it, as in a real deployment.
type Sentinel struct {
	t   testing.TB
	Dir string
	// Servers are the data nodes; Servers[0] started as the primary.
	// Which one is primary now is Primary's answer.
	Servers []*Private
	// SentinelAddrs are the sentinels' "127.0.0.1:<port>" addresses.
	SentinelAddrs []string
	sentinels     []*exec.Cmd
	quorum        int
}

// StartSentinel starts a topology in a temporary directory, stopped when
// the test ends. A missing redis-server or redis-sentinel fails the test.
func StartSentinel(t testing.TB, opts SentinelOptions) *Sentinel {
	t.Helper()
	s := NewSentinel(t, t.TempDir(), opts)
	t.Cleanup(s.Close)
	return s
}

// NewSentinel starts a topology with its files under dir (a directory per
// process) and waits until every sentinel knows every replica and every
// other sentinel; stopping it (Close) is the caller's job.
func NewSentinel(t testing.TB, dir string, opts SentinelOptions) *Sentinel {
	t.Helper()
	needCommands(t, "redis-server", "redis-sentinel")
	replicas, sentinels := max(opts.Replicas, 1), opts.Sentinels
	if sentinels <= 0 {
		sentinels = 3
	}
	s := &Sentinel{t: t, Dir: dir, quorum: sentinels/2 + 1}
	var primaryPort string
	for i := range replicas + 1 {
		p := &Private{t: t, Dir: filepath.Join(dir, "redis"+strconv.Itoa(i)), Addr: freePort(t)}
		p.Socket = filepath.Join(p.Dir, "redis.sock")
		p.config = filepath.Join(p.Dir, "redis.conf")
		_, port, _ := net.SplitHostPort(p.Addr)
		conf := []string{
			// By default a full resync starts at once instead of after
			// 5 s, so a demoted primary is back in sync within the test's
			// time.
			"repl-diskless-sync-delay " + strconv.Itoa(int(opts.ResyncDelay/time.Second)),
		}
		if i == 0 {
			primaryPort = port
		} else {
			conf = append(conf, "replicaof 127.0.0.1 "+primaryPort)
		}
		if opts.MinReplicasToWrite > 0 {
			conf = append(conf, "min-replicas-to-write "+strconv.Itoa(opts.MinReplicasToWrite), "min-replicas-max-lag 5")
		}
		writeConfig(s.t, p.config, conf)
		p.Start()
		s.Servers = append(s.Servers, p)
	}
	for i := range sentinels {
		sdir := filepath.Join(dir, "sentinel"+strconv.Itoa(i))
		addr := freePort(t)
		_, port, _ := net.SplitHostPort(addr)
		conf := filepath.Join(sdir, "sentinel.conf")
		writeConfig(s.t, conf, []string{
			"port " + port,
			"bind 127.0.0.1",
			"dir " + sdir,
			"logfile " + filepath.Join(sdir, "sentinel.log"),
			fmt.Sprintf("sentinel monitor %s 127.0.0.1 %s %d", SentinelMasterName, primaryPort, s.quorum),
			"sentinel down-after-milliseconds " + SentinelMasterName + " 1000",
			// Also the bound on one failover's steps and twice the pause
			// before a sentinel retries a failed one.
			"sentinel failover-timeout " + SentinelMasterName + " 3000",
			"sentinel parallel-syncs " + SentinelMasterName + " 1",
		})
		cmd := exec.Command("redis-sentinel", conf)
		if err := cmd.Start(); err != nil {
			s.Close()
			t.Fatalf("starting redis-sentinel: %v", err)
		}
		s.sentinels = append(s.sentinels, cmd)
		s.SentinelAddrs = append(s.SentinelAddrs, addr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.waitKnown(ctx, s.Servers[0].Addr); err != nil {
		s.Close()
		t.Fatalf("sentinel topology in %s not ready: %v", dir, err)
	}
	return s
}

// writeConfig writes a server's or a sentinel's config file, one
// directive a line, making its directory.
func writeConfig(t TB, path string, lines []string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatalf("%v", err)
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatalf("%v", err)
	}
}

// FailoverOptions are the options of a client that follows the primary
// through failovers (redis.NewFailoverClient), with the same short
// timeouts as Private's clients.
func (s *Sentinel) FailoverOptions() *redis.FailoverOptions {
	return &redis.FailoverOptions{
		MasterName:    SentinelMasterName,
		SentinelAddrs: slices.Clone(s.SentinelAddrs),
		DialTimeout:   200 * time.Millisecond,
		ReadTimeout:   time.Second,
		WriteTimeout:  time.Second,
	}
}

// Client returns a failover client of the topology, closed when the test
// ends.
func (s *Sentinel) Client(t testing.TB) *redis.Client {
	rdb := redis.NewFailoverClient(s.FailoverOptions())
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// Primary returns the server the sentinels name as primary now.
func (s *Sentinel) Primary(ctx context.Context) (*Private, error) {
	addr, err := s.masterAddr(ctx, 0)
	if err != nil {
		return nil, err
	}
	return s.server(addr)
}

func (s *Sentinel) server(addr string) (*Private, error) {
	for _, p := range s.Servers {
		if p.Addr == addr {
			return p, nil
		}
	}
	return nil, fmt.Errorf("the sentinels name %s as primary, a server not of this topology", addr)
}

// Failover makes a sentinel promote a replica (SENTINEL FAILOVER: no
// agreement and no wait for the replica to catch up, as an operator's
// command does) and waits until every sentinel and a fresh failover
// client name the new primary and it answers as one. It returns the old
// primary, which keeps taking writes of clients still connected to it
// until Sentinel converts it into a replica (WaitSynced waits for that).
func (s *Sentinel) Failover(ctx context.Context) (old *Private, err error) {
	oldAddr, err := s.masterAddr(ctx, 0)
	if err != nil {
		return nil, err
	}
	if old, err = s.server(oldAddr); err != nil {
		return nil, err
	}
	sc := redis.NewSentinelClient(&redis.Options{Addr: s.SentinelAddrs[0], DialTimeout: 200 * time.Millisecond})
	defer sc.Close()
	moved := func(addr string) bool { return addr != oldAddr }
	// The sentinel gives a failover up when the replica it picked does not
	// turn primary within failover-timeout (a replica slowed by a loaded
	// machine); it then names the old primary with no failover under way,
	// and the failover is asked for again.
	givenUp := func() bool {
		primary, inProgress, err := failoverState(ctx, sc)
		return err == nil && !inProgress && primary == oldAddr
	}
	for {
		if err := forceFailover(ctx, sc); err != nil {
			return old, err
		}
		if err := s.waitPrimary(ctx, moved, givenUp); !errors.Is(err, errFailoverGivenUp) {
			return old, err
		}
	}
}

// forceFailover asks the sentinel for a failover. A sentinel refuses while
// it sees no replica fit to promote (just after a previous failover it may
// not have its INFO yet) or while a failover is under way: it is asked
// again until ctx ends.
func forceFailover(ctx context.Context, sc *redis.SentinelClient) error {
	for {
		err := sc.Failover(ctx, SentinelMasterName).Err()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("SENTINEL FAILOVER: %w", err)
		}
		if !sleepCtx(ctx, 50*time.Millisecond) {
			return fmt.Errorf("SENTINEL FAILOVER: %w (%w)", err, ctx.Err())
		}
	}
}

var errFailoverGivenUp = errors.New("the sentinel gave the failover up")

// WaitFailoverAbort waits until the first sentinel has a failover under
// way and then ends it without a new primary: it gave the failover up.
func (s *Sentinel) WaitFailoverAbort(ctx context.Context) error {
	sc := redis.NewSentinelClient(&redis.Options{Addr: s.SentinelAddrs[0], DialTimeout: 200 * time.Millisecond})
	defer sc.Close()
	from, err := s.masterAddr(ctx, 0)
	if err != nil {
		return err
	}
	for started := false; ; {
		primary, inProgress, err := failoverState(ctx, sc)
		if err != nil {
			return err
		}
		switch {
		case primary != from:
			return fmt.Errorf("the failover was not given up: %s is primary", primary)
		case inProgress:
			started = true
		case started:
			return nil
		}
		if !sleepCtx(ctx, 20*time.Millisecond) {
			return fmt.Errorf("waiting for a failover to be given up: %w", ctx.Err())
		}
	}
}

// failoverState reads, from one sentinel, the primary it names and
// whether it has a failover under way.
func failoverState(ctx context.Context, sc *redis.SentinelClient) (primary string, inProgress bool, err error) {
	m, err := sc.Master(ctx, SentinelMasterName).Result()
	if err != nil {
		return "", false, err
	}
	return net.JoinHostPort(m["ip"], m["port"]), strings.Contains(m["flags"], "failover_in_progress"), nil
}

// KillPrimary kills the primary with SIGKILL (no AOF flush, no goodbye to
// its replicas) and returns it, for a later Start. The sentinels fail over
// on their own after down-after-milliseconds; WaitNewPrimary waits for it.
func (s *Sentinel) KillPrimary(ctx context.Context) (*Private, error) {
	p, err := s.Primary(ctx)
	if err != nil {
		return nil, err
	}
	p.Kill()
	return p, nil
}

// WaitNewPrimary waits until every sentinel and a fresh failover client
// name a primary other than old, and it answers as primary.
func (s *Sentinel) WaitNewPrimary(ctx context.Context, old *Private) error {
	return s.waitPrimary(ctx, func(addr string) bool { return addr != old.Addr }, nil)
}

// WaitSynced waits until the topology is whole again: every server is up
// and either the primary or a replica of it whose link is up and whose
// replication offset has reached the primary's. After a failover that
// includes Sentinel converting the old primary (about 8 s after the
// switch: Sentinel waits that long for newer configurations first).
func (s *Sentinel) WaitSynced(ctx context.Context) error {
	var last error
	for {
		last = s.synced(ctx)
		if last == nil {
			return nil
		}
		if !sleepCtx(ctx, 50*time.Millisecond) {
			return fmt.Errorf("topology not in sync: %w", last)
		}
	}
}

func (s *Sentinel) synced(ctx context.Context) error {
	paddr, err := s.masterAddr(ctx, 0)
	if err != nil {
		return err
	}
	primary, err := s.server(paddr)
	if err != nil {
		return err
	}
	pinfo, err := info(ctx, primary)
	if err != nil {
		return err
	}
	if pinfo["role"] != "master" {
		return fmt.Errorf("%s is named primary but is a %s", paddr, pinfo["role"])
	}
	offset := pinfo["master_repl_offset"]
	for _, p := range s.Servers {
		if p == primary {
			continue
		}
		ri, err := info(ctx, p)
		if err != nil {
			return err
		}
		_, mport, _ := net.SplitHostPort(paddr)
		switch {
		case ri["role"] != "slave" || ri["master_port"] != mport:
			return fmt.Errorf("%s is a %s of port %q, not a replica of %s", p.Addr, ri["role"], ri["master_port"], paddr)
		case ri["master_link_status"] != "up":
			return fmt.Errorf("replica %s: link to %s is %s", p.Addr, paddr, ri["master_link_status"])
		}
		if ro, _ := strconv.ParseInt(ri["slave_repl_offset"], 10, 64); ro < atoi64(offset) {
			return fmt.Errorf("replica %s at offset %d, primary at %s", p.Addr, ro, offset)
		}
	}
	return nil
}

// Close stops the sentinels and the servers.
func (s *Sentinel) Close() {
	for _, cmd := range s.sentinels {
		if cmd.Process != nil {
			cmd.Process.Signal(syscall.SIGTERM)
			cmd.Wait()
		}
	}
	s.sentinels = nil
	for _, p := range s.Servers {
		p.Stop()
	}
}

// Kill stops the server with SIGKILL: what the AOF has not written is
// lost, and its replicas learn of it only from the closed connection.
func (p *Private) Kill() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	p.cmd.Process.Kill()
	p.cmd.Wait()
	p.cmd = nil
}

// Pause stops the server's process (SIGSTOP), as a long fork, a swapped-out
// host or a VM pause does: connections stay open, nothing answers.
func (p *Private) Pause() { p.signal(syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT).
func (p *Private) Resume() { p.signal(syscall.SIGCONT) }

func (p *Private) signal(sig syscall.Signal) {
	if p.cmd != nil && p.cmd.Process != nil {
		p.cmd.Process.Signal(sig)
	}
}

// Running says whether the server's process is started and not stopped.
func (p *Private) Running() bool { return p.cmd != nil }

// waitKnown waits until every sentinel names primary, knows every other
// server as a replica with its link up, and knows every other sentinel:
// from then on a failover, forced or after a kill, can happen.
func (s *Sentinel) waitKnown(ctx context.Context, primary string) error {
	var last error
	for {
		if last = s.known(ctx, primary); last == nil {
			return nil
		}
		if !sleepCtx(ctx, 50*time.Millisecond) {
			return last
		}
	}
}

func (s *Sentinel) known(ctx context.Context, primary string) error {
	for i, addr := range s.SentinelAddrs {
		sc := redis.NewSentinelClient(&redis.Options{Addr: addr, DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
		m, err := sc.Master(ctx, SentinelMasterName).Result()
		if err == nil {
			var replicas []map[string]string
			if replicas, err = sc.Replicas(ctx, SentinelMasterName).Result(); err == nil {
				err = checkKnown(m, replicas, primary, len(s.Servers)-1, len(s.SentinelAddrs)-1)
			}
		}
		sc.Close()
		if err != nil {
			return fmt.Errorf("sentinel %d (%s): %w", i, addr, err)
		}
	}
	return nil
}

func checkKnown(m map[string]string, replicas []map[string]string, primary string, wantReplicas, wantSentinels int) error {
	if got := net.JoinHostPort(m["ip"], m["port"]); got != primary {
		return fmt.Errorf("names %s as primary, want %s", got, primary)
	}
	if m["flags"] != "master" {
		return fmt.Errorf("primary flags %q", m["flags"])
	}
	if n, _ := strconv.Atoi(m["num-other-sentinels"]); n < wantSentinels {
		return fmt.Errorf("knows %d other sentinels, want %d", n, wantSentinels)
	}
	up := 0
	for _, r := range replicas {
		if r["flags"] == "slave" && r["master-link-status"] == "ok" {
			up++
		}
	}
	if up < wantReplicas {
		return fmt.Errorf("knows %d replicas in sync, want %d", up, wantReplicas)
	}
	return nil
}

// masterAddr asks sentinel i which address is primary.
func (s *Sentinel) masterAddr(ctx context.Context, i int) (string, error) {
	sc := redis.NewSentinelClient(&redis.Options{Addr: s.SentinelAddrs[i], DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
	defer sc.Close()
	hp, err := sc.GetMasterAddrByName(ctx, SentinelMasterName).Result()
	if err != nil {
		return "", fmt.Errorf("sentinel %s: %w", s.SentinelAddrs[i], err)
	}
	return net.JoinHostPort(hp[0], hp[1]), nil
}

// waitPrimary waits until every sentinel names the same primary, ok
// accepts it, it reports role master, and a new failover client (which
// asks a sentinel and checks the role) reaches it. It returns
// errFailoverGivenUp as soon as givenUp, unless nil, reports true.
func (s *Sentinel) waitPrimary(ctx context.Context, ok func(addr string) bool, givenUp func() bool) error {
	var last error
	for {
		if last = s.primaryAgreed(ctx, ok); last == nil {
			return nil
		}
		if givenUp != nil && givenUp() {
			return errFailoverGivenUp
		}
		if !sleepCtx(ctx, 20*time.Millisecond) {
			return fmt.Errorf("waiting for a new primary: %w", last)
		}
	}
}

func (s *Sentinel) primaryAgreed(ctx context.Context, ok func(addr string) bool) error {
	var agreed string
	for i := range s.SentinelAddrs {
		addr, err := s.masterAddr(ctx, i)
		if err != nil {
			return err
		}
		if !ok(addr) {
			return fmt.Errorf("sentinel %s still names %s", s.SentinelAddrs[i], addr)
		}
		if agreed != "" && addr != agreed {
			return fmt.Errorf("sentinels disagree: %s and %s", agreed, addr)
		}
		agreed = addr
	}
	p, err := s.server(agreed)
	if err != nil {
		return err
	}
	if in, err := info(ctx, p); err != nil {
		return err
	} else if in["role"] != "master" {
		return fmt.Errorf("%s is named primary but reports role %s", agreed, in["role"])
	}
	opts := s.FailoverOptions()
	opts.MaxRetries = -1
	fc := redis.NewFailoverClient(opts)
	defer fc.Close()
	var lines string
	if lines, err = fc.Info(ctx, "server").Result(); err != nil {
		return fmt.Errorf("a failover client: %w", err)
	}
	if port := infoFields(lines)["tcp_port"]; port != p.Addr[strings.LastIndexByte(p.Addr, ':')+1:] {
		return fmt.Errorf("a failover client reached port %s, not %s", port, agreed)
	}
	return nil
}

// info returns the replication section of a server's INFO as fields.
func info(ctx context.Context, p *Private) (map[string]string, error) {
	if !p.Running() {
		return nil, fmt.Errorf("%s is not running", p.Addr)
	}
	c := redis.NewClient(&redis.Options{Network: "unix", Addr: p.Socket, DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
	defer c.Close()
	lines, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return nil, fmt.Errorf("INFO of %s: %w", p.Addr, err)
	}
	return infoFields(lines), nil
}

func infoFields(lines string) map[string]string {
	m := map[string]string{}
	for line := range strings.SplitSeq(lines, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			m[k] = v
		}
	}
	return m
}

func atoi64(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

// sleepCtx sleeps d or until ctx ends; false when ctx ended.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
