package probe

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apernet/hysteria/core/v2/server"

	"switchyard/health"
	"switchyard/internal/testcert"
	"switchyard/netx"
	"switchyard/outbound"
	"switchyard/outbound/hysteria2"
	"switchyard/spec"
)

const (
	hy2Host     = "hy2.test"
	hy2Password = "hy2-secret"
)

// hy2Node is a real Hysteria 2 node: the protocol authors' core/v2 server
// on a loopback UDP port, reaching destinations itself (h3Host as
// loopback), and this module's Hysteria 2 outbound to it.
type hy2Node struct {
	out         *hysteria2.Outbound
	udpSessions atomic.Int32 // UDP sessions the server carried
}

func startHy2Node(t *testing.T) *hy2Node {
	t.Helper()
	cert := testcert.New(t, hy2Host)
	uc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	n := &hy2Node{}
	srv, err := server.NewServer(&server.Config{
		TLSConfig:     server.TLSConfig{Certificates: []tls.Certificate{cert.Certificate}},
		Conn:          uc,
		Outbound:      loopbackNames{},
		Authenticator: password(hy2Password),
		EventLogger:   hy2Events{n},
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { srv.Serve(); close(done) }()
	t.Cleanup(func() { srv.Close(); <-done })

	n.out, err = hysteria2.New(spec.Outbound{
		Tag:      "hy2",
		Type:     "hysteria2",
		UDP:      true,
		Server:   uc.LocalAddr().String(),
		Password: hy2Password,
		TLS:      &spec.TLS{ServerName: hy2Host, ALPN: []string{"h3"}, CAFile: cert.CertFile},
	}, outbound.Deps{Dialer: netx.NewDialer(netx.SocketPolicy{}, 0), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.out.Close() })
	return n
}

type password string

func (p password) Authenticate(_ net.Addr, auth string, _ uint64) (bool, string) {
	return auth == string(p), "user"
}

type hy2Events struct{ n *hy2Node }

func (hy2Events) Connect(net.Addr, string, uint64)              {}
func (hy2Events) Disconnect(net.Addr, string, error)            {}
func (hy2Events) TCPRequest(net.Addr, string, string)           {}
func (hy2Events) TCPError(net.Addr, string, string, error)      {}
func (e hy2Events) UDPRequest(net.Addr, string, uint32, string) { e.n.udpSessions.Add(1) }
func (hy2Events) UDPError(net.Addr, string, uint32, error)      {}

// loopbackNames is the server's way out: it dials and sends directly,
// h3Host being 127.0.0.1.
type loopbackNames struct{}

func resolveName(addr string) string {
	if host, port, err := net.SplitHostPort(addr); err == nil && strings.EqualFold(host, h3Host) {
		return net.JoinHostPort("127.0.0.1", port)
	}
	return addr
}

func (loopbackNames) TCP(addr string) (net.Conn, error) { return net.Dial("tcp", resolveName(addr)) }
func (loopbackNames) CheckUDP(string) error             { return nil }

func (loopbackNames) UDP(string) (server.UDPConn, error) {
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, err
	}
	return udpOut{c}, nil
}

type udpOut struct{ c *net.UDPConn }

func (u udpOut) ReadFrom(b []byte) (int, string, error) {
	n, from, err := u.c.ReadFromUDP(b)
	if err != nil {
		return 0, "", err
	}
	return n, from.String(), nil
}

func (u udpOut) WriteTo(b []byte, addr string) (int, error) {
	a, err := net.ResolveUDPAddr("udp4", resolveName(addr))
	if err != nil {
		return 0, err
	}
	return u.c.WriteTo(b, a)
}

func (u udpOut) Close() error { return u.c.Close() }

// The QUIC probe through a real Hysteria 2 node reaches the h3 server: the
// node carried a UDP session, the server completed the handshake.
func TestQUICProbeThroughHysteria2(t *testing.T) {
	s := newH3Server(t)
	n := startHy2Node(t)
	p := quicProber(n.out, Options{RootCAs: s.roots})
	res, err := p.QUIC(within(t, 10*time.Second), s.url())
	if err != nil {
		t.Fatal(err)
	}
	if res.RTT <= 0 {
		t.Fatalf("%+v", res)
	}
	waitUntil(t, func() bool { return s.handshakes.Load() == 1 })
	if n.udpSessions.Load() != 1 {
		t.Fatalf("the node carried %d UDP sessions, want 1", n.udpSessions.Load())
	}
}

// scoreHeard records the engine's OnScoreQUIC calls.
type scoreHeard struct {
	mu  sync.Mutex
	ok  []time.Duration
	bad int
}

func (h *scoreHeard) hook(_ health.NodeID, _ time.Time, rtt time.Duration, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ok {
		h.ok = append(h.ok, rtt)
	} else {
		h.bad++
	}
}

func (h *scoreHeard) counts() (ok, bad int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ok), h.bad
}

// nodeID is the Hysteria 2 node's identity in the engine tests.
var nodeID = health.NodeID{0x17, 3}

// hy2Engine is a health engine on the wall clock probing the Hysteria 2
// node n as a Score leaf, its TCP check URL the h3 server's, its DNS
// check server dns.
func hy2Engine(t *testing.T, n *hy2Node, s *h3Server, dns netx.Addr, heard *scoreHeard) *health.Engine {
	t.Helper()
	e := health.New(health.Options{
		TCPCheckURLs:  []string{s.url()},
		UDPCheckDNS:   []netx.Addr{dns},
		CheckInterval: time.Minute,
		CheckTimeout:  3 * time.Second,
		OnScoreQUIC:   heard.hook,
	})
	t.Cleanup(e.Stop)
	e.Sync([]health.Node{{ID: nodeID, Name: "hy2", UDP: true, Incarnation: 1,
		Prober: New(n.out, Options{RootCAs: s.roots, Timeouts: Timeouts{Request: 300 * time.Millisecond}})}})
	e.SetScoreLeaves([]health.NodeID{nodeID})
	return e
}

// The periodic UDP cycle of a Score leaf performs the handshake through
// the Hysteria 2 node; its duration reaches OnScoreQUIC, while the UDP
// averages are the DNS query's alone.
func TestScoreQUICCycleThroughHysteria2(t *testing.T) {
	s := newH3Server(t)
	n := startHy2Node(t)
	dns := newDNSResponder(t, func(q []byte) [][]byte { return [][]byte{response(q, 0)} })
	heard := &scoreHeard{}
	e := hy2Engine(t, n, s, dns.addr(), heard)
	e.Start()
	waitUntil(t, func() bool {
		ok, _ := heard.counts()
		st, _ := e.State(nodeID)
		return ok == 1 && len(st.States[health.DataUDP][netx.V4].History) == 1
	})
	if ok, bad := heard.counts(); ok != 1 || bad != 0 {
		t.Fatalf("OnScoreQUIC heard %d successes, %d failures", ok, bad)
	}
	if s.handshakes.Load() != 1 {
		t.Fatalf("the server completed %d handshakes", s.handshakes.Load())
	}
	st, _ := e.State(nodeID)
	dnsState, data := st.States[health.DNSUDP][netx.V4], st.States[health.DataUDP][netx.V4]
	if !data.HasLatency || data.Latency != dnsState.Latency || data.History[0].Delay != dnsState.History[0].Delay {
		t.Fatalf("data_udp %+v is not the DNS query's sample %+v", data, dnsState)
	}
}

// Through the same node, a DNS server that never answers fails DnsUdp
// only while the handshake succeeds: DataUdp keeps no failure.
func TestScoreQUICRescuesDataUDPThroughHysteria2(t *testing.T) {
	s := newH3Server(t)
	n := startHy2Node(t)
	silent := newDNSResponder(t, func([]byte) [][]byte { return nil })
	heard := &scoreHeard{}
	e := hy2Engine(t, n, s, silent.addr(), heard)
	e.ProbeNow(context.Background(), nodeID)
	st, _ := e.State(nodeID)
	dnsState, data := st.States[health.DNSUDP][netx.V4], st.States[health.DataUDP][netx.V4]
	if dnsState.ProbeFailures != 1 || data.ProbeFailures != 0 || !data.Observed || !data.Alive || data.HasLatency {
		t.Fatalf("dns_udp %+v\ndata_udp %+v", dnsState, data)
	}
	if ok, _ := heard.counts(); ok != 1 {
		t.Fatalf("OnScoreQUIC heard %d successes", ok)
	}
}
