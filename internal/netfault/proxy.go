// Package netfault is a TCP proxy that makes network faults on command —
// a black-hole partition, slow replies, a lost reply — between a client
// and any server that speaks over TCP or a unix socket (Redis, Postgres).
// It does not parse the protocol, so every engine's tests can use it.
package netfault

import (
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy is a TCP proxy between clients and a server that makes network
// faults on command: a black-hole partition, slow replies, a lost reply. It listens on 127.0.0.1 and forwards every connection it accepts
// to one upstream address (TCP or a unix socket). Faults apply to every
// connection, open or new, from the moment the method returns.
//
// Requests flow client → server and replies server → client; the proxy
// does not parse the protocol, so "a reply" is whatever one read from the
// server returns.
// For one command on an otherwise idle connection that is its whole reply.
type Proxy struct {
	// upstream names the server a new connection goes to.
	upstream func() (network, address string, err error)
	ln       net.Listener

	mu         sync.Mutex
	gateOpen   *sync.Cond // broadcast on every mode change
	blackHole  bool
	delay      time.Duration
	dropArmed  bool
	dropped    int
	accepted   int
	conns      map[*proxyConn]struct{}
	closed     bool
	goroutines sync.WaitGroup
}

// proxyConn is one client connection and its upstream connection.
type proxyConn struct {
	client, server net.Conn
	// dropReply is set when the request that disarmed DropNextReply went
	// through this connection: its next reply is discarded and both sides
	// are closed.
	dropReply bool
	// closed is set (under Proxy.mu) when either side is closed, so that
	// a chunk held by a black-hole is let go.
	closed    bool
	closeOnce sync.Once
}

// closeConn closes both sides of c and wakes whatever holds its chunks.
func (p *Proxy) closeConn(c *proxyConn) {
	c.closeOnce.Do(func() {
		c.client.Close()
		c.server.Close()
	})
	p.mu.Lock()
	c.closed = true
	p.gateOpen.Broadcast()
	p.mu.Unlock()
}

// New starts a proxy in front of the server at network/address (e.g.
// "tcp", "127.0.0.1:5432", or "unix" and a socket path) and stops it when
// the test ends. It starts passing traffic.
func New(t testing.TB, network, address string) *Proxy {
	t.Helper()
	return NewTo(t, func() (string, string, error) { return network, address, nil })
}

// NewTo is New with the upstream looked up for each new
// connection, e.g. the primary a Sentinel names now: after a failover the
// old primary drops its clients, they reconnect, and their new
// connections go to the new primary. A lookup that fails refuses the
// connection (the client sees it closed), as an unreachable server does.
func NewTo(t testing.TB, upstream func() (network, address string, err error)) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy listen: %v", err)
	}
	p := &Proxy{upstream: upstream, ln: ln, conns: map[*proxyConn]struct{}{}}
	p.gateOpen = sync.NewCond(&p.mu)
	p.goroutines.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// Addr is the proxy's address, host:port, for a client's options.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Pass ends every fault: traffic flows again, and bytes held by a
// black-hole are delivered in order, as TCP retransmits them when a
// partition heals.
func (p *Proxy) Pass() {
	p.setMode(func() { p.blackHole, p.delay, p.dropArmed = false, 0, false })
}

// BlackHole partitions clients from the server: connections stay open and new
// ones are accepted, sends succeed until the socket buffers fill, but
// nothing is delivered either way, so clients see only timeouts. What is
// sent meanwhile is held, not lost: Pass delivers it, so a request sent
// into the partition can reach the server long after its sender gave up (use
// Reset to model a partition that outlasts TCP's retransmissions).
func (p *Proxy) BlackHole() { p.setMode(func() { p.blackHole = true }) }

// Delay holds every reply for d before delivering it (0 removes the
// latency). Requests are not delayed, so a command runs in the server on time
// and its sender learns of it d late.
func (p *Proxy) Delay(d time.Duration) { p.setMode(func() { p.delay = d }) }

// DropNextReply loses the reply to the next request that passes through
// the proxy: the request reaches the server and runs, its reply is discarded and
// the connection is closed, which is what a lost reply looks like to a
// client (it sees EOF and, if it retries, sends the request again).
// Other connections are unaffected. Dropped counts the replies lost.
func (p *Proxy) DropNextReply() { p.setMode(func() { p.dropArmed = true }) }

// Dropped returns how many replies DropNextReply has discarded.
func (p *Proxy) Dropped() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dropped
}

// Accepted returns how many client connections the proxy has accepted.
func (p *Proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

// Open returns how many client connections are open now.
func (p *Proxy) Open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// Reset closes every open connection (clients see a reset; held bytes are
// lost), keeping the current mode for new ones.
func (p *Proxy) Reset() {
	p.mu.Lock()
	conns := make([]*proxyConn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		p.closeConn(c)
	}
}

// Close stops the proxy, closes its connections and waits for its
// goroutines. It is called when the test ends; calling it twice is safe.
func (p *Proxy) Close() {
	p.mu.Lock()
	already := p.closed
	p.closed = true
	p.gateOpen.Broadcast()
	p.mu.Unlock()
	if !already {
		p.ln.Close()
	}
	p.Reset()
	p.goroutines.Wait()
}

func (p *Proxy) setMode(change func()) {
	p.mu.Lock()
	change()
	p.gateOpen.Broadcast()
	p.mu.Unlock()
}

func (p *Proxy) accept() {
	defer p.goroutines.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		network, address, err := p.upstream()
		if err != nil {
			client.Close()
			continue
		}
		server, err := net.Dial(network, address)
		if err != nil {
			client.Close()
			continue
		}
		c := &proxyConn{client: client, server: server}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			p.closeConn(c)
			return
		}
		p.accepted++
		p.conns[c] = struct{}{}
		p.goroutines.Add(2)
		p.mu.Unlock()
		go p.pump(c, c.client, c.server, p.forwardRequest)
		go p.pump(c, c.server, c.client, p.forwardReply)
	}
}

// chunk is one read from a connection and when it arrived.
type chunk struct {
	data    []byte
	arrived time.Time
}

// pump copies src to dst through deliver, which holds, delays or drops each
// chunk. Reading and delivering run apart so that a delay adds latency
// without throttling, and a held chunk stops further reads only once a
// small queue fills (then the kernel's socket buffers absorb the sender).
func (p *Proxy) pump(c *proxyConn, src, dst net.Conn, deliver func(*proxyConn, net.Conn, chunk) bool) {
	defer p.goroutines.Done()
	queue := make(chan chunk, 16)
	p.goroutines.Add(1)
	go func() {
		defer p.goroutines.Done()
		defer close(queue)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				queue <- chunk{data: buf[:n], arrived: time.Now()}
			}
			if err != nil {
				return
			}
		}
	}()
	defer func() {
		p.closeConn(c)
		for range queue { // let the reader finish on the closed conn
		}
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
	}()
	for ch := range queue {
		if !deliver(c, dst, ch) {
			return
		}
	}
}

// waitGate blocks while the proxy black-holes traffic and reports false
// once the proxy or c is closed. It returns with p.mu held.
func (p *Proxy) waitGate(c *proxyConn) bool {
	p.mu.Lock()
	for p.blackHole && !p.closed && !c.closed {
		p.gateOpen.Wait()
	}
	return !p.closed && !c.closed
}

func (p *Proxy) forwardRequest(c *proxyConn, dst net.Conn, ch chunk) bool {
	if !p.waitGate(c) {
		p.mu.Unlock()
		return false
	}
	if p.dropArmed {
		p.dropArmed = false
		c.dropReply = true
	}
	p.mu.Unlock()
	return write(dst, ch.data)
}

func (p *Proxy) forwardReply(c *proxyConn, dst net.Conn, ch chunk) bool {
	for {
		if !p.waitGate(c) {
			p.mu.Unlock()
			return false
		}
		due := ch.arrived.Add(p.delay)
		if c.dropReply {
			p.dropped++
			p.mu.Unlock()
			return false // pump closes both sides
		}
		wait := time.Until(due)
		if wait <= 0 {
			p.mu.Unlock()
			return write(dst, ch.data)
		}
		// Wait out the latency, but wake on a mode change: a black-hole
		// or a shorter delay set meanwhile applies to this reply too.
		timer := time.AfterFunc(wait, func() {
			p.mu.Lock()
			p.gateOpen.Broadcast()
			p.mu.Unlock()
		})
		p.gateOpen.Wait()
		p.mu.Unlock()
		timer.Stop()
	}
}

func write(dst net.Conn, data []byte) bool {
	_, err := dst.Write(data)
	return err == nil
}
