package redistest_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/belfry/belfry/internal/redistest"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// proxied is a private Redis, a proxy in front of it and a direct client
// that sees what really reached Redis.
func proxied(t *testing.T) (*redistest.Proxy, redis.UniversalClient) {
	t.Helper()
	priv := redistest.StartPrivate(t)
	return redistest.NewProxy(t, "unix", priv.Socket), priv.Client(t)
}

// rawConn is a client connection that speaks RESP by hand, so a test sees
// exactly which bytes arrive and when.
type rawConn struct {
	t    *testing.T
	conn net.Conn
	rd   *bufio.Reader
}

func dialRaw(t *testing.T, p *redistest.Proxy) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, conn: c, rd: bufio.NewReader(c)}
}

func (c *rawConn) send(cmd string) {
	c.t.Helper()
	if _, err := c.conn.Write([]byte(cmd + "\r\n")); err != nil {
		c.t.Fatalf("send %q: %v", cmd, err)
	}
}

// reply reads one reply line, waiting at most within.
func (c *rawConn) reply(within time.Duration) (string, error) {
	c.conn.SetReadDeadline(time.Now().Add(within))
	line, err := c.rd.ReadString('\n')
	if err != nil {
		return line, err
	}
	return line[:len(line)-2], nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func get(t *testing.T, rdb redis.UniversalClient, key string) string {
	t.Helper()
	v, err := rdb.Get(context.Background(), key).Result()
	if err != nil && err != redis.Nil {
		t.Fatal(err)
	}
	return v
}

func TestProxyPassesTraffic(t *testing.T) {
	t.Parallel()
	p, direct := proxied(t)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr()})
	defer rdb.Close()
	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if got := get(t, direct, "k"); got != "v" {
		t.Errorf("Redis holds %q after a SET through the proxy, want v", got)
	}
	if got, err := rdb.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Errorf("GET through the proxy = %q, %v; want v", got, err)
	}
	if p.Accepted() == 0 || p.Open() == 0 {
		t.Errorf("proxy accepted %d and holds %d connections, want at least 1 each", p.Accepted(), p.Open())
	}
}

// A black-hole delivers nothing either way and keeps connections open; on
// Pass the held bytes go through in order, as after a healed partition.
func TestProxyBlackHoleHoldsTrafficUntilPass(t *testing.T) {
	t.Parallel()
	p, direct := proxied(t)
	c := dialRaw(t, p)
	c.send("PING")
	if r, err := c.reply(2 * time.Second); err != nil || r != "+PONG" {
		t.Fatalf("PING before the partition: %q, %v", r, err)
	}

	p.BlackHole()
	c.send("INCR req")
	if r, err := c.reply(300 * time.Millisecond); !isTimeout(err) {
		t.Fatalf("read during the black-hole = %q, %v; want a timeout on an open connection", r, err)
	}
	if got := get(t, direct, "req"); got != "" {
		t.Fatalf("a request sent into the black-hole reached Redis (req = %q)", got)
	}
	late := dialRaw(t, p) // a connection made during the partition
	late.send("PING")
	if r, err := late.reply(200 * time.Millisecond); !isTimeout(err) {
		t.Fatalf("new connection during the black-hole read %q, %v; want a timeout", r, err)
	}

	p.Pass()
	if r, err := c.reply(2 * time.Second); err != nil || r != ":1" {
		t.Fatalf("held request after Pass: %q, %v; want :1", r, err)
	}
	if r, err := late.reply(2 * time.Second); err != nil || r != "+PONG" {
		t.Fatalf("held PING after Pass: %q, %v; want +PONG", r, err)
	}

	// Replies are held too: this request reaches Redis, its reply does not
	// reach the client while the partition lasts.
	p.Delay(200 * time.Millisecond)
	c.send("INCR reply")
	redistest.WaitFor(t, 2*time.Second, "the request to reach Redis", func() bool { return get(t, direct, "reply") == "1" })
	p.BlackHole()
	if r, err := c.reply(500 * time.Millisecond); !isTimeout(err) {
		t.Fatalf("reply delivered through the black-hole: %q, %v", r, err)
	}
	p.Pass()
	if r, err := c.reply(2 * time.Second); err != nil || r != ":1" {
		t.Fatalf("held reply after Pass: %q, %v; want :1", r, err)
	}
}

func TestProxyDelaysReplies(t *testing.T) {
	t.Parallel()
	p, direct := proxied(t)
	ctx := context.Background()
	rdb := p.Client(t, redis.Options{})
	const delay = time.Second
	p.Delay(delay)
	start := time.Now()
	setDone := make(chan error, 1)
	go func() { setDone <- rdb.Set(ctx, "k", "v", 0).Err() }()
	// The command itself runs on time; only its reply is late.
	redistest.WaitFor(t, 2*delay, "the SET to reach Redis", func() bool { return get(t, direct, "k") == "v" })
	select {
	case <-setDone:
		t.Fatalf("the SET's reply came %s after it was sent, with %s of latency", time.Since(start), delay)
	default:
	}
	if err := <-setDone; err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < delay {
		t.Errorf("SET with %s of reply latency took %s", delay, took)
	}
	p.Delay(0)
	start = time.Now()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took >= delay {
		t.Errorf("PING after the latency was removed took %s", took)
	}
}

func TestProxyDropsExactlyTheNextReply(t *testing.T) {
	t.Parallel()
	p, direct := proxied(t)
	c := dialRaw(t, p)
	p.DropNextReply()
	c.send("INCR k")
	if r, err := c.reply(2 * time.Second); !errors.Is(err, io.EOF) || r != "" {
		t.Fatalf("read after a dropped reply = %q, %v; want EOF and no bytes", r, err)
	}
	if got := get(t, direct, "k"); got != "1" {
		t.Fatalf("the request whose reply was dropped did not run: k = %q", got)
	}
	if p.Dropped() != 1 {
		t.Errorf("Dropped() = %d, want 1", p.Dropped())
	}
	next := dialRaw(t, p)
	next.send("INCR k")
	if r, err := next.reply(2 * time.Second); err != nil || r != ":2" {
		t.Fatalf("the reply after the dropped one: %q, %v; want :2", r, err)
	}

	// go-redis sees the lost reply as EOF and sends the command again: a
	// non-idempotent command then runs twice.
	rdb := p.Client(t, redis.Options{})
	p.DropNextReply()
	n, err := rdb.Incr(context.Background(), "k").Result()
	if err != nil || n != 4 {
		t.Fatalf("INCR through a lost reply = %d, %v; want 4 (run, reply lost, retried)", n, err)
	}
	if p.Dropped() != 2 {
		t.Errorf("Dropped() = %d, want 2", p.Dropped())
	}
}

// Reset closes the connections a black-hole holds, as a partition that
// outlasts TCP's retransmissions does; new ones still follow the mode.
func TestProxyResetClosesHeldConnections(t *testing.T) {
	t.Parallel()
	p, _ := proxied(t)
	c := dialRaw(t, p)
	c.send("PING")
	if r, err := c.reply(2 * time.Second); err != nil || r != "+PONG" {
		t.Fatalf("PING: %q, %v", r, err)
	}
	p.BlackHole()
	c.send("PING")
	p.Reset()
	if r, err := c.reply(2 * time.Second); !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read after Reset = %q, %v; want the connection closed", r, err)
	}
	redistest.WaitFor(t, 2*time.Second, "the proxy to let go of the reset connection", func() bool { return p.Open() == 0 })
	p.Pass()
	next := dialRaw(t, p)
	next.send("PING")
	if r, err := next.reply(2 * time.Second); err != nil || r != "+PONG" {
		t.Fatalf("PING on a new connection after Reset: %q, %v", r, err)
	}
}
