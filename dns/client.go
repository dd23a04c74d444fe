package dns

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	mdns "github.com/miekg/dns"

	"switchyard/netx"
)

// Client asks one server. It is safe for concurrent use; Close releases
// the connections it keeps (idle TCP and TLS streams, the DoH connection).
type Client struct {
	srv     Server
	timeout time.Duration
	dialer  Dialer
	boot    netx.Resolver
	log     *slog.Logger
	tls     *tls.Config // tls and https
	doh     *dohClient  // https
	// target is the server's addresses and the one in use; nil until a
	// name is resolved, and again after every address failed.
	target atomic.Pointer[targets]

	mu      sync.Mutex // guards pending, idle, udp and closed; never held across I/O
	pending *pendingLookup
	idle    []idleStream
	udp     map[netip.AddrPort]*udpSock // the shared UDP sockets (udpmux.go)
	closed  bool

	readers sync.WaitGroup // the udp sockets' reader goroutines
	udpIdle time.Duration  // udpIdleTimeout; shorter in tests

	// lastFailure is when an exchange with the server last failed (unix
	// nanoseconds, 0: never), for the resolver's order of servers.
	lastFailure atomic.Int64
}

// targets is an immutable list of the server's addresses and the index of
// the one queries go to.
type targets struct {
	addrs []netip.AddrPort
	cur   int
}

type pendingLookup struct {
	done chan struct{}
	err  error
}

type idleStream struct {
	c     net.Conn
	to    netip.AddrPort
	since time.Time
}

// Stream connections (tcp, tls, and tcp after a truncated udp answer) are
// kept for the next query: at most maxIdleStreams per server, each for
// streamIdleTimeout (a server closes an idle stream after a few seconds;
// RFC 7766 suggests no less than 10).
const (
	maxIdleStreams    = 2
	streamIdleTimeout = 10 * time.Second
)

// udpRetransmit is how long a UDP query waits for its answer before the
// same query is sent again on the same socket, until the exchange's
// deadline: one lost datagram costs a second, not the whole timeout.
const udpRetransmit = time.Second

// maxMessage is the largest DNS message (the TCP length prefix is 16 bits).
const maxMessage = 65535

// tlsSessionCache is the number of TLS sessions kept per server for
// resumption.
const tlsSessionCache = 8

// NewClient returns the client of srv. It opens its sockets with
// o.Dialer, resolves a server given by name with o.Bootstrap and verifies
// tls and https servers with o.RootCAs (nil: the system roots). It opens
// no socket until the first Exchange.
func NewClient(srv Server, o Options) *Client {
	o = o.withDefaults()
	c := &Client{srv: srv, timeout: o.Timeout, dialer: o.Dialer, boot: o.Bootstrap, log: o.Logger, udpIdle: udpIdleTimeout}
	if ip, ok := srv.IP(); ok {
		c.target.Store(&targets{addrs: []netip.AddrPort{netip.AddrPortFrom(ip, srv.Port)}})
	}
	if srv.Kind == TLS || srv.Kind == HTTPS {
		c.tls = &tls.Config{
			ServerName:         srv.Host,
			RootCAs:            o.RootCAs,
			MinVersion:         tls.VersionTLS12,
			ClientSessionCache: tls.NewLRUClientSessionCache(tlsSessionCache),
		}
	}
	if srv.Kind == HTTPS {
		c.doh = newDoH(c, o.Timeout)
	}
	return c
}

// Server is the server the client asks.
func (c *Client) Server() Server { return c.srv }

// ErrClosed is returned by an exchange on a closed client or resolver.
var ErrClosed = errors.New("dns: closed")

// Exchange sends the query m and returns the server's answer, whose ID is
// m's. m is not modified; on the wire it carries a fresh random ID (0 for
// DoH, as RFC 8484 asks). The exchange ends with ctx, and at the latest
// after the client's timeout (Options.Timeout).
func (c *Client) Exchange(ctx context.Context, m *mdns.Msg) (*mdns.Msg, error) {
	if len(m.Question) != 1 {
		return nil, fmt.Errorf("dns: %s: %w", c.srv.URL, ErrBadQuery)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	start := time.Now()
	resp, err := c.exchange(ctx, m)
	if err != nil {
		c.lastFailure.Store(time.Now().UnixNano())
	}
	if c.log.Enabled(ctx, slog.LevelDebug) {
		q := m.Question[0]
		took := time.Since(start).Round(time.Microsecond)
		if err != nil {
			c.log.Debug(fmt.Sprintf("dns: %s %s %s: %v (%s)", c.srv.URL, q.Name, mdns.Type(q.Qtype), err, took))
		} else {
			c.log.Debug(fmt.Sprintf("dns: %s %s %s: %s in %s", c.srv.URL, q.Name, mdns.Type(q.Qtype), mdns.RcodeToString[resp.Rcode], took))
		}
	}
	if err != nil {
		return nil, fmt.Errorf("dns: %s: %w", c.srv.URL, err)
	}
	resp.Id = m.Id
	return resp, nil
}

func (c *Client) exchange(ctx context.Context, m *mdns.Msg) (*mdns.Msg, error) {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	if c.srv.Kind == System {
		return systemExchange(ctx, m)
	}
	wire, err := m.Pack()
	if err != nil {
		return nil, fmt.Errorf("packing the query: %w", err)
	}
	// The ID: 0 for DoH; a random one for streams; the shared UDP socket
	// picks one not in flight on it.
	id := uint16(0)
	if c.srv.Kind != HTTPS && c.srv.Kind != UDP {
		id = uint16(rand.Uint32())
	}
	binary.BigEndian.PutUint16(wire, id)
	q := m.Question[0]
	if c.srv.Kind == HTTPS {
		return c.doh.exchange(ctx, wire, q)
	}
	to, err := c.resolve(ctx)
	if err != nil {
		return nil, err
	}
	var resp *mdns.Msg
	switch c.srv.Kind {
	case UDP:
		resp, id, err = c.exchangeUDP(ctx, to, wire, q)
		if err == nil && resp.Truncated {
			// The full answer does not fit a datagram: the same
			// server over TCP (RFC 7766).
			resp, err = c.exchangeStream(ctx, to, wire, id, q, false)
		}
	default:
		resp, err = c.exchangeStream(ctx, to, wire, id, q, c.srv.Kind == TLS)
	}
	if err != nil {
		c.failed(to)
	}
	return resp, err
}

// resolve returns the address queries go to: the URL's IP, or the current
// one of the addresses the bootstrap resolver gave for its name. The name
// is looked up once, by one caller while the others wait, and again only
// once every address failed.
func (c *Client) resolve(ctx context.Context) (netip.AddrPort, error) {
	for {
		if t := c.target.Load(); t != nil {
			return t.addrs[t.cur], nil
		}
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return netip.AddrPort{}, ErrClosed
		}
		if c.target.Load() != nil {
			c.mu.Unlock()
			continue
		}
		p := c.pending
		lead := p == nil
		if lead {
			p = &pendingLookup{done: make(chan struct{})}
			c.pending = p
		}
		c.mu.Unlock()
		if lead {
			p.err = c.lookupHost(ctx)
			c.mu.Lock()
			c.pending = nil
			c.mu.Unlock()
			close(p.done)
			if p.err != nil {
				return netip.AddrPort{}, p.err
			}
			continue
		}
		select {
		case <-p.done:
			if p.err != nil {
				return netip.AddrPort{}, p.err
			}
		case <-ctx.Done():
			return netip.AddrPort{}, context.Cause(ctx)
		}
	}
}

func (c *Client) lookupHost(ctx context.Context) error {
	ips, err := c.boot.LookupIP(ctx, c.srv.Host)
	if err != nil {
		return fmt.Errorf("bootstrap lookup of %s: %w", c.srv.Host, err)
	}
	if len(ips) == 0 {
		return fmt.Errorf("bootstrap lookup of %s: no address", c.srv.Host)
	}
	addrs := make([]netip.AddrPort, len(ips))
	for i, ip := range ips {
		addrs[i] = netip.AddrPortFrom(ip.Unmap(), c.srv.Port)
	}
	c.target.Store(&targets{addrs: addrs})
	return nil
}

// failed moves queries from the address to to the next one; after the
// last, a name is resolved again. An IP from the URL stays.
func (c *Client) failed(to netip.AddrPort) {
	if _, ok := c.srv.IP(); ok {
		return
	}
	t := c.target.Load()
	if t == nil || t.addrs[t.cur] != to {
		return // another failure moved on already
	}
	var next *targets
	if t.cur+1 < len(t.addrs) {
		next = &targets{addrs: t.addrs, cur: t.cur + 1}
	}
	c.target.CompareAndSwap(t, next)
}

// aLongTimeAgo is a deadline in the past: it fails pending I/O at once.
var aLongTimeAgo = time.Unix(1, 0)

// bound makes conn's I/O end with ctx: at its deadline, and at once when
// it is cancelled. Call the returned stop when done.
func bound(ctx context.Context, conn net.Conn) (stop func() bool) {
	if d, ok := ctx.Deadline(); ok {
		conn.SetDeadline(d)
	}
	return context.AfterFunc(ctx, func() { conn.SetDeadline(aLongTimeAgo) })
}

// parseAnswer unpacks b as the answer to the query of id and question q.
func parseAnswer(b []byte, id uint16, q mdns.Question) (*mdns.Msg, bool) {
	resp := new(mdns.Msg)
	if err := resp.Unpack(b); err != nil {
		return nil, false
	}
	return resp, answers(resp, id, q)
}

// answers reports whether resp is an answer to the query of id and
// question q: a response with that ID, carrying q (names compared without
// case), or no question when it reports an error.
func answers(resp *mdns.Msg, id uint16, q mdns.Question) bool {
	if !resp.Response || resp.Id != id {
		return false
	}
	if len(resp.Question) == 0 {
		return resp.Rcode != mdns.RcodeSuccess
	}
	a := resp.Question[0]
	return len(resp.Question) == 1 && a.Qtype == q.Qtype && a.Qclass == q.Qclass && strings.EqualFold(a.Name, q.Name)
}

// exchangeStream asks over a stream: an idle one kept from an earlier
// query when there is one (and again on a new stream when that one turns
// out to be closed), else a new one.
func (c *Client) exchangeStream(ctx context.Context, to netip.AddrPort, wire []byte, id uint16, q mdns.Question, useTLS bool) (*mdns.Msg, error) {
	for {
		conn := c.takeIdle(to)
		reused := conn != nil
		if !reused {
			var err error
			if conn, err = c.dialStream(ctx, to, useTLS); err != nil {
				return nil, err
			}
		}
		resp, reusable, err := streamRoundTrip(ctx, conn, wire, id, q)
		if err == nil {
			if reusable {
				c.putIdle(conn, to)
			} else {
				conn.Close()
			}
			return resp, nil
		}
		conn.Close()
		if !reused || ctx.Err() != nil {
			return nil, err
		}
	}
}

func (c *Client) dialStream(ctx context.Context, to netip.AddrPort, useTLS bool) (net.Conn, error) {
	conn, err := c.dialer.DialContext(ctx, "tcp", to.String())
	if err != nil {
		return nil, err
	}
	if !useTLS {
		return conn, nil
	}
	tc := tls.Client(conn, c.tls)
	if err := tc.HandshakeContext(ctx); err != nil {
		conn.Close()
		return nil, fmt.Errorf("tls handshake: %w", err)
	}
	return tc, nil
}

// streamRoundTrip writes the query with its length prefix and reads the
// answer (RFC 1035 4.2.2). reusable is false when the stream cannot carry
// another query (ctx ended as the answer came in).
func streamRoundTrip(ctx context.Context, conn net.Conn, wire []byte, id uint16, q mdns.Question) (resp *mdns.Msg, reusable bool, err error) {
	stop := bound(ctx, conn)
	defer stop()
	out := make([]byte, 2+len(wire))
	binary.BigEndian.PutUint16(out, uint16(len(wire)))
	copy(out[2:], wire)
	if _, err := conn.Write(out); err != nil {
		return nil, false, err
	}
	var head [2]byte
	if _, err := io.ReadFull(conn, head[:]); err != nil {
		return nil, false, err
	}
	body := make([]byte, binary.BigEndian.Uint16(head[:]))
	if _, err := io.ReadFull(conn, body); err != nil {
		return nil, false, err
	}
	resp, ok := parseAnswer(body, id, q)
	if !ok {
		return nil, false, errors.New("the server sent a message that does not answer the query")
	}
	if !stop() {
		return resp, false, nil // the stream's deadline was moved to the past
	}
	conn.SetDeadline(time.Time{})
	return resp, true, nil
}

func (c *Client) takeIdle(to netip.AddrPort) net.Conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	for len(c.idle) > 0 {
		s := c.idle[len(c.idle)-1]
		c.idle = c.idle[:len(c.idle)-1]
		if s.to == to && now.Sub(s.since) < streamIdleTimeout {
			return s.c
		}
		s.c.Close()
	}
	return nil
}

func (c *Client) putIdle(conn net.Conn, to netip.AddrPort) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || len(c.idle) >= maxIdleStreams {
		conn.Close()
		return
	}
	c.idle = append(c.idle, idleStream{c: conn, to: to, since: time.Now()})
}

// Close closes the kept connections and the shared UDP sockets, and waits
// for their readers; later exchanges fail with ErrClosed, as do the UDP
// exchanges in flight. Stream exchanges in flight end with their contexts.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	idle := c.idle
	c.idle = nil
	c.mu.Unlock()
	for _, s := range idle {
		s.c.Close()
	}
	c.closeUDP()
	if c.doh != nil {
		c.doh.close()
	}
	return nil
}
