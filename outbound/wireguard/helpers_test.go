package wireguard

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"switchyard/netx"
	"switchyard/outbound"
	"switchyard/spec"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeResolver answers from a map and counts its lookups.
type fakeResolver struct {
	mu      sync.Mutex
	answers map[string][]netip.Addr
	err     error
	lookups int
}

func resolverOf(pairs ...string) *fakeResolver {
	r := &fakeResolver{answers: map[string][]netip.Addr{}}
	for i := 0; i+1 < len(pairs); i += 2 {
		r.answers[pairs[i]] = append(r.answers[pairs[i]], netip.MustParseAddr(pairs[i+1]))
	}
	return r
}

func (r *fakeResolver) LookupIP(_ context.Context, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lookups++
	if r.err != nil {
		return nil, r.err
	}
	return r.answers[host], nil
}

func (r *fakeResolver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lookups
}

// logLines collects log output.
type logLines struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *logLines) String() string     { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }
func (l *logLines) count(s string) int { return strings.Count(l.String(), s) }

// countSoon is count once it reaches want or 5 s have passed: a line the
// slot logs as it learns of a loss may come just after the dial that saw
// the loss returned.
func (l *logLines) countSoon(s string, want int) int {
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := l.count(s)
		if n >= want || time.Now().After(deadline) {
			return n
		}
		time.Sleep(time.Millisecond)
	}
}

// sockets records the sockets the policy hook sees, and may refuse them.
type sockets struct {
	mu     sync.Mutex
	seen   []netx.SocketInfo
	refuse error
}

func (s *sockets) hook(i netx.SocketInfo) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen = append(s.seen, i)
	return s.refuse
}

func (s *sockets) networks() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, i := range s.seen {
		out = append(out, i.Network)
	}
	return out
}

// fakeClock is a time source the test moves.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *fakeClock { return &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// client is an outbound under test with what it was built with.
type client struct {
	*Outbound
	socks   *sockets
	logs    *logLines
	servers *fakeResolver
	dests   *fakeResolver
}

// clientSpec is a spec for a client of p (nil: an endpoint nothing
// answers on), with the test's key pair.
func clientSpec(p *testPeer, keys keyPair) spec.Outbound {
	o := spec.Outbound{
		Tag:        "wg",
		Type:       "wireguard",
		UDP:        true,
		Endpoint:   "peer.test:9",
		PrivateKey: keys.private,
		Addresses:  []netip.Prefix{clientV4, clientV6},
	}
	o.PeerPublicKey = keys.public // any valid key when there is no peer
	if p != nil {
		o.Endpoint = "peer.test:" + itoa(p.addr.Port())
		o.PeerPublicKey = p.keys.public
	}
	return o
}

func itoa(n uint16) string {
	return netip.AddrPortFrom(netip.IPv4Unspecified(), n).String()[len("0.0.0.0:"):]
}

func newClient(t *testing.T, o spec.Outbound) *client {
	t.Helper()
	c := &client{
		socks:   &sockets{},
		logs:    &logLines{},
		servers: resolverOf("peer.test", "127.0.0.1"),
		dests: resolverOf(
			"echo.test", "10.7.0.1",
			"echo.test", "fd00:7::1",
			"v4.test", "10.7.0.1",
			"v6.test", "fd00:7::1",
		),
	}
	out, err := New(o, c.deps())
	if err != nil {
		t.Fatal(err)
	}
	c.Outbound = out
	t.Cleanup(func() { out.Close() })
	return c
}

// pair starts a peer and a client of it sharing keys, PSK and reserved
// bytes.
func pair(t *testing.T, psk string, reserved []byte) (*testPeer, *client) {
	t.Helper()
	keys := newKeyPair(t)
	p := startPeer(t, peerOptions{client: keys.public, psk: psk, reserved: reserved})
	o := clientSpec(p, keys)
	o.PresharedKey = psk
	o.Reserved = reserved
	return p, newClient(t, o)
}

func dialTCP(t *testing.T, c *client, dst string) net.Conn {
	t.Helper()
	a, err := netx.ParseAddr(dst)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := c.DialStream(ctx, netx.Flow{Dst: a})
	if err != nil {
		t.Fatalf("dial %s: %v\nlogs:\n%s", dst, err, c.logs)
	}
	return conn
}

// echoOnce sends payload on conn, half-closes it and requires the same
// bytes back followed by EOF.
func echoOnce(t *testing.T, conn net.Conn, payload []byte) {
	t.Helper()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	errc := make(chan error, 1)
	go func() {
		_, err := conn.Write(payload)
		if err == nil {
			err = conn.(interface{ CloseWrite() error }).CloseWrite()
		}
		errc <- err
	}()
	got, err := io.ReadAll(conn)
	if werr := <-errc; werr != nil {
		t.Fatalf("write: %v", werr)
	}
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if !bytes.Equal(got, payload) {
		t.Fatalf("echo of %d bytes came back as %d bytes, equal: %v", len(payload), len(got), bytes.Equal(got, payload))
	}
}

// reader reads a link until it fails, so a test can wait for a reply with
// a timeout.
type reader struct {
	replies chan reply
	done    chan struct{}
}

type reply struct {
	from netx.Addr
	b    []byte
	err  error
}

// readLink starts reading l; the test's cleanup closes l and waits.
func readLink(t *testing.T, l netx.PacketLink) *reader {
	r := &reader{replies: make(chan reply, 64), done: make(chan struct{})}
	stop := make(chan struct{})
	go func() {
		defer close(r.done)
		for {
			b := make([]byte, 65535)
			n, from, err := l.ReadPacket(b)
			select {
			case r.replies <- reply{from, b[:n], err}:
			case <-stop:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { close(stop); l.Close(); <-r.done })
	return r
}

// exchange sends payload to `to` and returns the reply, sending again (up
// to three times) when a datagram is lost while the handshake completes.
func (r *reader) exchange(t *testing.T, l netx.PacketLink, to netx.Addr, payload []byte) (netx.Addr, []byte) {
	t.Helper()
	for range 3 {
		if err := l.WritePacket(payload, to); err != nil {
			t.Fatalf("send to %s: %v", to, err)
		}
		select {
		case got := <-r.replies:
			if got.err != nil {
				t.Fatalf("receive: %v", got.err)
			}
			return got.from, got.b
		case <-time.After(3 * time.Second):
		}
	}
	t.Fatalf("no reply from %s", to)
	return netx.Addr{}, nil
}

// deps is what the client was built with.
func (c *client) deps() outbound.Deps {
	return outbound.Deps{
		Dialer:       netx.NewDialer(netx.SocketPolicy{Hook: c.socks.hook}, time.Second),
		Servers:      c.servers,
		Destinations: c.dests,
		Logger:       slog.New(slog.NewTextHandler(c.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
}

func mustIP(s string) netip.Addr { return netip.MustParseAddr(s) }

func mustAddr(s string) netx.Addr {
	a, err := netx.ParseAddr(s)
	if err != nil {
		panic(err)
	}
	return a
}

var errRefused = errors.New("refused by the platform")
