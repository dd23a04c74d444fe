package probe

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/netx"
)

// testDialer is a node that connects straight to the flow's destination on
// loopback, after delay.
type testDialer struct {
	delay   time.Duration
	streams atomic.Int32
	dsts    chan netx.Addr // when set, receives every stream's destination
	// packet opens the packet path; nil opens a loopback UDP socket.
	packet func(ctx context.Context, f netx.Flow) (netx.PacketLink, error)
}

func (d *testDialer) DialStream(ctx context.Context, f netx.Flow) (net.Conn, error) {
	if f.Network != netx.TCP {
		return nil, errors.New("stream flow not TCP")
	}
	d.streams.Add(1)
	if d.dsts != nil {
		d.dsts <- f.Dst
	}
	if d.delay > 0 {
		select {
		case <-time.After(d.delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	var nd net.Dialer
	return nd.DialContext(ctx, "tcp", f.Dst.String())
}

func (d *testDialer) DialPacket(ctx context.Context, f netx.Flow) (netx.PacketLink, error) {
	if f.Network != netx.UDP {
		return nil, errors.New("packet flow not UDP")
	}
	if d.packet != nil {
		return d.packet(ctx, f)
	}
	return newUDPLink()
}

// udpLink is a PacketLink over one loopback UDP socket.
type udpLink struct{ c *net.UDPConn }

func newUDPLink() (*udpLink, error) {
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, err
	}
	return &udpLink{c: c}, nil
}

func (l *udpLink) WritePacket(p []byte, to netx.Addr) error {
	ap, ok := to.AddrPort()
	if !ok {
		return errors.New("udpLink: needs an IP")
	}
	_, err := l.c.WriteToUDPAddrPort(p, ap)
	return err
}

func (l *udpLink) ReadPacket(p []byte) (int, netx.Addr, error) {
	n, from, err := l.c.ReadFromUDPAddrPort(p)
	return n, netx.AddrFromAddrPort(from), err
}

func (l *udpLink) Close() error { return l.c.Close() }

// reply is a scripted server's answer to one request.
type reply struct {
	wire  string        // bytes to send
	delay time.Duration // before sending them
	close bool          // close the connection after them
}

// h1Server is an HTTP/1.1 server on loopback that answers each request on
// each connection as its script says, and records the methods it saw per
// connection.
type h1Server struct {
	t      *testing.T
	ln     net.Listener
	script func(req int, method string) reply
	wg     sync.WaitGroup

	mu      sync.Mutex
	methods [][]string // per connection, in accept order
	conns   []net.Conn
}

func newH1Server(t *testing.T, script func(req int, method string) reply) *h1Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &h1Server{t: t, ln: ln, script: script}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(s.close)
	return s
}

func (s *h1Server) url(path string) string { return "http://" + s.ln.Addr().String() + path }

func (s *h1Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		i := len(s.methods)
		s.methods = append(s.methods, nil)
		s.conns = append(s.conns, c)
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serve(i, c)
	}
}

func (s *h1Server) serve(i int, c net.Conn) {
	defer s.wg.Done()
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	for req := 0; ; req++ {
		line, err := br.ReadString('\n')
		if err != nil {
			return
		}
		method, _, _ := strings.Cut(line, " ")
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				return
			}
			if l == "\r\n" {
				break
			}
		}
		s.mu.Lock()
		s.methods[i] = append(s.methods[i], method)
		s.mu.Unlock()
		r := s.script(req, method)
		if r.delay > 0 {
			time.Sleep(r.delay)
		}
		if _, err := c.Write([]byte(r.wire)); err != nil || r.close {
			return
		}
	}
}

func (s *h1Server) seen() [][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([][]string, len(s.methods))
	for i, m := range s.methods {
		out[i] = append([]string(nil), m...)
	}
	return out
}

func (s *h1Server) close() {
	s.ln.Close()
	s.mu.Lock()
	for _, c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// always answers every request with wire.
func always(wire string) func(int, string) reply {
	return func(int, string) reply { return reply{wire: wire} }
}

const noContent = "HTTP/1.1 204 No Content\r\n\r\n"

// dnsResponder answers DNS queries on loopback UDP: answer returns the
// datagrams to send back for a query (none: silence).
type dnsResponder struct {
	c  *net.UDPConn
	wg sync.WaitGroup
}

func newDNSResponder(t *testing.T, answer func(q []byte) [][]byte) *dnsResponder {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	r := &dnsResponder{c: c}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		buf := make([]byte, 1500)
		for {
			n, from, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			for _, p := range answer(append([]byte(nil), buf[:n]...)) {
				c.WriteToUDPAddrPort(p, from)
			}
		}
	}()
	t.Cleanup(func() { c.Close(); r.wg.Wait() })
	return r
}

func (r *dnsResponder) addr() netx.Addr {
	return netx.AddrFromAddrPort(netip.MustParseAddrPort(r.c.LocalAddr().String()))
}

func within(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
