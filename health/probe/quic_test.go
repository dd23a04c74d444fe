package probe

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"go.uber.org/goleak"

	"switchyard/health"
	"switchyard/internal/testcert"
	"switchyard/netx"
)

// h3Host is the name the h3 test server's certificate is for.
const h3Host = "h3.test"

// h3Server is an HTTP/3 server (quic-go's http3) on a loopback UDP port,
// with a self-signed certificate for h3Host, counting the QUIC handshakes
// for h3Host with ALPN h3 it completed.
type h3Server struct {
	udp        *net.UDPConn
	ln         *quic.EarlyListener
	srv        *http3.Server
	roots      *x509.CertPool
	handshakes atomic.Int32
	accepted   atomic.Int32
	wg         sync.WaitGroup
	mu         sync.Mutex
	notes      []string
}

func (s *h3Server) note(x string) { s.mu.Lock(); s.notes = append(s.notes, x); s.mu.Unlock() }

// newH3Server serves h3 unless alpn names other protocols.
func newH3Server(t *testing.T, alpn ...string) *h3Server {
	t.Helper()
	cert := testcert.New(t, h3Host)
	s := &h3Server{roots: x509.NewCertPool()}
	leaf, err := x509.ParseCertificate(cert.Certificate.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	s.roots.AddCert(leaf)
	if s.udp, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}); err != nil {
		t.Fatal(err)
	}
	if len(alpn) == 0 {
		alpn = []string{http3.NextProtoH3}
	}
	tc := &tls.Config{Certificates: []tls.Certificate{cert.Certificate}, NextProtos: alpn}
	// An early listener hands a connection over before its handshake
	// completed: the probe closes right after its own, which can beat a
	// completed connection's queuing for a plain listener's Accept.
	if s.ln, err = quic.ListenEarly(s.udp, tc, &quic.Config{}); err != nil {
		t.Fatal(err)
	}
	s.srv = &http3.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := s.ln.Accept(context.Background())
			if err != nil {
				return
			}
			s.accepted.Add(1)
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				select {
				case <-c.HandshakeComplete():
				case <-c.Context().Done():
				}
				select {
				case <-c.HandshakeComplete():
					if cs := c.ConnectionState().TLS; cs.ServerName == h3Host && cs.NegotiatedProtocol == http3.NextProtoH3 {
						s.handshakes.Add(1)
					}
				default:
					s.note(context.Cause(c.Context()).Error())
					return
				}
				s.srv.ServeQUICConn(c)
			}()
		}
	}()
	t.Cleanup(func() {
		s.ln.Close()
		s.srv.Close()
		s.wg.Wait()
		s.udp.Close()
	})
	return s
}

func (s *h3Server) port() uint16 { return uint16(s.udp.LocalAddr().(*net.UDPAddr).Port) }

// url is an https URL of the server by its certificate's name.
func (s *h3Server) url() string {
	return "https://" + h3Host + ":" + strconv.Itoa(int(s.port())) + "/generate_204"
}

// namedLink is a loopback link that sends to a name by its IP in names,
// reports its server's family as IPv6, and records its close.
type namedLink struct {
	*udpLink
	names  map[string]netx.Addr
	closed atomic.Bool
}

func (l *namedLink) WritePacket(p []byte, to netx.Addr) error {
	if to.IsName() {
		a, ok := l.names[to.Name]
		if !ok {
			return errors.New("namedLink: unknown name " + to.Name)
		}
		to = netx.AddrFromAddrPort(netip.AddrPortFrom(a.IP, to.Port))
	}
	return l.udpLink.WritePacket(p, to)
}

func (l *namedLink) ServerFamily() (netx.Family, bool) { return netx.V6, true }
func (l *namedLink) Close() error                      { l.closed.Store(true); return l.udpLink.Close() }

// namedDialer is a node whose packet path resolves h3Host to loopback, and
// which keeps every link it opened.
type namedDialer struct {
	testDialer
	mu    sync.Mutex
	links []*namedLink
	flows []netx.Flow
	err   error // DialPacket's failure, when set
}

func newNamedDialer() *namedDialer {
	d := &namedDialer{}
	d.packet = func(_ context.Context, f netx.Flow) (netx.PacketLink, error) {
		d.mu.Lock()
		defer d.mu.Unlock()
		d.flows = append(d.flows, f)
		if d.err != nil {
			return nil, d.err
		}
		u, err := newUDPLink()
		if err != nil {
			return nil, err
		}
		l := &namedLink{udpLink: u, names: map[string]netx.Addr{h3Host: {IP: netip.MustParseAddr("127.0.0.1")}}}
		d.links = append(d.links, l)
		return l, nil
	}
	return d
}

// allClosed reports whether every link the dialer opened is closed.
func (d *namedDialer) allClosed(t *testing.T) {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, l := range d.links {
		if !l.closed.Load() {
			t.Errorf("link %d left open", i)
		}
	}
}

func quicProber(d Dialer, opts Options) health.QUICProber {
	return New(d, opts).(health.QUICProber)
}

// The handshake reaches the h3 server through the node's packet path,
// asked for the URL's host and port; the RTT is the handshake's, the
// family the link's, and the link is closed on return.
func TestQUICProbeHandshake(t *testing.T) {
	s := newH3Server(t)
	d := newNamedDialer()
	before := goleak.IgnoreCurrent()
	res, err := quicProber(d, Options{RootCAs: s.roots}).QUIC(within(t, 5*time.Second), s.url())
	if err != nil {
		t.Fatal(err)
	}
	// The probe's goroutines (its pump, quic-go's) end with it; the
	// server's for the connection once it sees the close.
	goleak.VerifyNone(t, before)
	if res.RTT <= 0 || res.RTT > 2*time.Second || res.Family != netx.V6 {
		t.Fatalf("%+v", res)
	}
	deadline := time.Now().Add(5 * time.Second)
	for s.handshakes.Load() != 1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if s.handshakes.Load() != 1 {
		s.mu.Lock()
		t.Fatalf("handshakes %d accepted %d notes %v", s.handshakes.Load(), s.accepted.Load(), s.notes)
	}
	if len(d.flows) != 1 || d.flows[0].Network != netx.UDP || d.flows[0].Dst != netx.DomainAddr(h3Host, s.port()) {
		t.Fatalf("flows %+v", d.flows)
	}
	d.allClosed(t)
}

// The server's certificate is verified: roots that do not hold it fail the
// handshake, and so does another server name.
func TestQUICProbeVerifiesCertificate(t *testing.T) {
	s := newH3Server(t)
	other := testcert.New(t, h3Host)
	roots := x509.NewCertPool()
	leaf, _ := x509.ParseCertificate(other.Certificate.Certificate[0])
	roots.AddCert(leaf)
	d := newNamedDialer()
	_, err := quicProber(d, Options{RootCAs: roots}).QUIC(within(t, 5*time.Second), s.url())
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Fatalf("err %v, want an unknown authority", err)
	}
	if s.handshakes.Load() != 0 {
		t.Fatal("the server completed a handshake")
	}
	d.allClosed(t)
}

// A server that does not speak h3 fails the probe.
func TestQUICProbeRequiresH3(t *testing.T) {
	s := newH3Server(t, "h3-29")
	d := newNamedDialer()
	_, err := quicProber(d, Options{RootCAs: s.roots}).QUIC(within(t, 5*time.Second), s.url())
	if err == nil {
		t.Fatal("a server without h3 passed")
	}
	d.allClosed(t)
}

// A silent peer: the handshake ends at its TLS budget, the link closed.
func TestQUICProbeBounded(t *testing.T) {
	silent, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	url := "https://" + h3Host + ":" + strconv.Itoa(silent.LocalAddr().(*net.UDPAddr).Port) + "/"
	d := newNamedDialer()
	start := time.Now()
	_, err = quicProber(d, Options{Timeouts: Timeouts{TLS: 150 * time.Millisecond}}).QUIC(context.Background(), url)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Second {
		t.Fatalf("%v after %v", err, time.Since(start))
	}
	var fe *health.FamilyError
	if !errors.As(err, &fe) || fe.Family != netx.V6 {
		t.Fatalf("err %v does not name the link's family", err)
	}
	d.allClosed(t)
	// The caller's context bounds it too.
	start = time.Now()
	_, err = quicProber(d, Options{}).QUIC(within(t, 150*time.Millisecond), url)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Second {
		t.Fatalf("%v after %v", err, time.Since(start))
	}
	d.allClosed(t)
}

// Only an https URL is probed; a packet path that does not open fails
// with its error.
func TestQUICProbeRefusals(t *testing.T) {
	d := newNamedDialer()
	p := quicProber(d, Options{})
	for _, u := range []string{"http://" + h3Host + "/", "", "https://", "ftp://x/"} {
		if _, err := p.QUIC(within(t, time.Second), u); !errors.Is(err, ErrBadURL) {
			t.Errorf("%q: %v, want ErrBadURL", u, err)
		}
	}
	if len(d.flows) != 0 {
		t.Fatalf("a refused URL opened the packet path: %+v", d.flows)
	}
	d.err = errors.New("no packet path")
	if _, err := p.QUIC(within(t, time.Second), "https://"+h3Host+"/"); !errors.Is(err, d.err) {
		t.Fatalf("err %v", err)
	}
}

// waitUntil polls cond for up to 5 s.
func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 5 s")
		}
	}
}
