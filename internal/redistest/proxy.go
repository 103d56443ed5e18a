package redistest

import (
	"context"
	"testing"

	"github.com/belfry/belfry/internal/netfault"
	"github.com/redis/go-redis/v9"
)

// Proxy is a netfault.Proxy in front of a Redis server, with a way to make
// clients of it. Its faults (BlackHole, Delay, DropNextReply, Reset, Pass)
// are netfault's: it does not parse RESP, so "a reply" is whatever one
// read from Redis returns, for one command on an idle connection its whole
// reply.
type Proxy struct{ *netfault.Proxy }

// NewProxy starts a proxy in front of the Redis at network/address (e.g.
// "unix", p.Socket of a Private) and stops it when the test ends. It
// starts passing traffic.
func NewProxy(t testing.TB, network, address string) *Proxy {
	t.Helper()
	return &Proxy{netfault.New(t, network, address)}
}

// NewProxyTo is NewProxy with the upstream looked up for each new
// connection, e.g. the primary a Sentinel names now (see netfault.NewTo).
func NewProxyTo(t testing.TB, upstream func() (network, address string, err error)) *Proxy {
	t.Helper()
	return &Proxy{netfault.NewTo(t, upstream)}
}

// Client returns a client of the proxy built from opts (Addr is set),
// closed when the test ends. It is connected before it is returned, so a
// fault armed next (DropNextReply) hits a command, not the connection's
// handshake.
func (p *Proxy) Client(t testing.TB, opts redis.Options) *redis.Client {
	t.Helper()
	opts.Addr = p.Addr()
	rdb := redis.NewClient(&opts)
	t.Cleanup(func() { rdb.Close() })
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("redis through the proxy at %s: %v", p.Addr(), err)
	}
	return rdb
}
