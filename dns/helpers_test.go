package dns

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mdns "github.com/miekg/dns"
)

// zone is the test servers' data and their count of queries.
type zone struct {
	mu     sync.Mutex
	counts map[string]int             // "name type" -> queries seen
	ids    map[string]map[uint16]bool // "name type" -> the IDs of the queries seen
	// hold, when set, is waited on before answering slow.test.
	hold chan struct{}
	// held is told of each query of slow.test once it waits.
	held chan struct{}
}

func newZone() *zone { return &zone{counts: map[string]int{}, ids: map[string]map[uint16]bool{}} }

// distinct is the number of distinct queries (by ID) of name and qtype: a
// query sent again is counted once.
func (z *zone) distinct(name string, qtype uint16) int {
	z.mu.Lock()
	defer z.mu.Unlock()
	return len(z.ids[strings.ToLower(name)+" "+mdns.Type(qtype).String()])
}

func (z *zone) count(name string, qtype uint16) int {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.counts[strings.ToLower(name)+" "+mdns.Type(qtype).String()]
}

func (z *zone) total() int {
	z.mu.Lock()
	defer z.mu.Unlock()
	n := 0
	for _, c := range z.counts {
		n += c
	}
	return n
}

func soa(zoneName string, ttl, minttl uint32) mdns.RR {
	return &mdns.SOA{Hdr: mdns.RR_Header{Name: zoneName, Rrtype: mdns.TypeSOA, Class: mdns.ClassINET, Ttl: ttl},
		Ns: "ns." + zoneName, Mbox: "admin." + zoneName, Serial: 1, Refresh: 3600, Retry: 600, Expire: 86400, Minttl: minttl}
}

func rr(s string) mdns.RR {
	r, err := mdns.NewRR(s)
	if err != nil {
		panic(err)
	}
	return r
}

// answer is the zone's reply to q arriving over network ("udp" or "tcp").
//
//	a.test        A 192.0.2.1 (300 s), AAAA 2001:db8::1 (600 s)
//	b.test        A 192.0.2.2 (300 s)        (asked of the second server in rule tests)
//	nx.test       NXDOMAIN, SOA TTL 3600 minimum 30
//	nosoa.test    NXDOMAIN without an SOA
//	nodata.test   A 192.0.2.3 (100 s); AAAA NODATA, SOA minimum 45
//	tc.test       over UDP: truncated and empty; over TCP: A 192.0.2.4
//	fail.test     SERVFAIL
//	slow.test     A 192.0.2.5 once hold is closed
//	dns.test      A 127.0.0.1 (a server's name, for bootstraps)
//	anything else A 192.0.2.9 (60 s)
func (z *zone) answer(q *mdns.Msg, network string) *mdns.Msg {
	m := new(mdns.Msg)
	m.SetReply(q)
	m.RecursionAvailable = true
	if len(q.Question) != 1 {
		m.Rcode = mdns.RcodeFormatError
		return m
	}
	qq := q.Question[0]
	name := strings.ToLower(qq.Name)
	key := name + " " + mdns.Type(qq.Qtype).String()
	z.mu.Lock()
	z.counts[key]++
	if z.ids[key] == nil {
		z.ids[key] = map[uint16]bool{}
	}
	z.ids[key][q.Id] = true
	z.mu.Unlock()
	add := func(s string) { m.Answer = append(m.Answer, rr(s)) }
	switch name {
	case "a.test.":
		switch qq.Qtype {
		case mdns.TypeA:
			add("a.test. 300 IN A 192.0.2.1")
		case mdns.TypeAAAA:
			add("a.test. 600 IN AAAA 2001:db8::1")
		}
	case "b.test.":
		if qq.Qtype == mdns.TypeA {
			add("b.test. 300 IN A 192.0.2.2")
		}
	case "nx.test.":
		m.Rcode = mdns.RcodeNameError
		m.Ns = append(m.Ns, soa("test.", 3600, 30))
	case "nosoa.test.":
		m.Rcode = mdns.RcodeNameError
	case "nodata.test.":
		if qq.Qtype == mdns.TypeA {
			add("nodata.test. 100 IN A 192.0.2.3")
		} else {
			m.Ns = append(m.Ns, soa("test.", 3600, 45))
		}
	case "tc.test.":
		if network == "udp" {
			m.Truncated = true
		} else if qq.Qtype == mdns.TypeA {
			add("tc.test. 300 IN A 192.0.2.4")
		}
	case "dns.test.":
		if qq.Qtype == mdns.TypeA {
			add("dns.test. 300 IN A 127.0.0.1")
		}
	case "fail.test.":
		m.Rcode = mdns.RcodeServerFailure
	case "slow.test.":
		if z.held != nil {
			z.held <- struct{}{}
		}
		if z.hold != nil {
			<-z.hold
		}
		if qq.Qtype == mdns.TypeA {
			add("slow.test. 300 IN A 192.0.2.5")
		}
	default:
		if qq.Qtype == mdns.TypeA {
			add(qq.Name + " 60 IN A 192.0.2.9")
		}
	}
	return m
}

func (z *zone) handler(network string) mdns.Handler {
	return mdns.HandlerFunc(func(w mdns.ResponseWriter, q *mdns.Msg) {
		w.WriteMsg(z.answer(q, network))
	})
}

// serve runs a miekg server on pc or l until the test ends.
func serve(t testing.TB, srv *mdns.Server) {
	t.Helper()
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	done := make(chan error, 1)
	go func() { done <- srv.ActivateAndServe() }()
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("dns server: %v", err)
	}
	t.Cleanup(func() {
		srv.Shutdown()
		<-done
	})
}

// startUDP serves z over UDP on 127.0.0.1 and returns the address.
func startUDP(t testing.TB, z *zone) netip.AddrPort {
	t.Helper()
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serve(t, &mdns.Server{PacketConn: pc, Handler: z.handler("udp")})
	return netip.MustParseAddrPort(pc.LocalAddr().String())
}

// startTCP serves z over TCP on addr ("127.0.0.1:0" for any port).
func startTCP(t *testing.T, z *zone, addr string) netip.AddrPort {
	t.Helper()
	l, err := net.Listen("tcp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	serve(t, &mdns.Server{Listener: l, Handler: z.handler("tcp")})
	return netip.MustParseAddrPort(l.Addr().String())
}

// startUDPAndTCP serves z over UDP and TCP on the same port.
func startUDPAndTCP(t *testing.T, z *zone) netip.AddrPort {
	t.Helper()
	for range 20 {
		pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		l, err := net.Listen("tcp4", pc.LocalAddr().String())
		if err != nil {
			pc.Close()
			continue
		}
		serve(t, &mdns.Server{PacketConn: pc, Handler: z.handler("udp")})
		serve(t, &mdns.Server{Listener: l, Handler: z.handler("tcp")})
		return netip.MustParseAddrPort(pc.LocalAddr().String())
	}
	t.Fatal("no port free for both UDP and TCP")
	return netip.AddrPort{}
}

// testCert is a self-signed certificate for 127.0.0.1 and dns.test, and
// the pool that trusts it.
func testCert(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "dns.test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		DNSNames:              []string{"dns.test"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}, pool
}

// startTLS serves z over DNS over TLS and returns the address and roots.
func startTLS(t *testing.T, z *zone) (netip.AddrPort, *x509.CertPool) {
	t.Helper()
	cert, pool := testCert(t)
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tl := tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	serve(t, &mdns.Server{Listener: tl, Handler: z.handler("tcp")})
	return netip.MustParseAddrPort(l.Addr().String()), pool
}

// dohServer serves z over DNS over HTTPS at /dns-query, HTTP/2 over TLS.
type dohServer struct {
	*httptest.Server
	roots  *x509.CertPool
	protos sync.Map // "HTTP/2.0" -> true
	posts  atomic.Int64
}

func startDoH(t *testing.T, z *zone, connState ...func(net.Conn, http.ConnState)) *dohServer {
	t.Helper()
	d := &dohServer{}
	d.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.protos.Store(r.Proto, true)
		if r.URL.Path != "/dns-query" || r.Method != http.MethodPost || r.Header.Get("Content-Type") != dnsMessageType {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		d.posts.Add(1)
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		q := new(mdns.Msg)
		if err := q.Unpack(body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if q.Id != 0 {
			http.Error(w, fmt.Sprintf("query ID %d, not 0", q.Id), http.StatusBadRequest)
			return
		}
		out, err := z.answer(q, "tcp").Pack()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", dnsMessageType)
		w.Write(out)
	}))
	d.EnableHTTP2 = true
	if len(connState) > 0 {
		d.Config.ConnState = connState[0]
	}
	d.StartTLS()
	t.Cleanup(d.Close)
	d.roots = x509.NewCertPool()
	d.roots.AddCert(d.Certificate())
	return d
}

// deadUDP is a bound UDP socket that never answers.
func deadUDP(t *testing.T) netip.AddrPort {
	t.Helper()
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	return netip.MustParseAddrPort(pc.LocalAddr().String())
}

// refusingTCP is a port where nothing listens.
func refusingTCP(t *testing.T) netip.AddrPort {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := netip.MustParseAddrPort(l.Addr().String())
	l.Close()
	return a
}

func servers(t testing.TB, urls ...string) []Server {
	t.Helper()
	out := make([]Server, len(urls))
	for i, u := range urls {
		out[i] = mustServer(t, u)
	}
	return out
}

// newResolver makes a resolver closed when the test ends.
func newResolver(t testing.TB, o Options, urls ...string) *Resolver {
	t.Helper()
	r := New(servers(t, urls...), o)
	t.Cleanup(func() { r.Close() })
	return r
}

func question(name string, qtype uint16) *mdns.Msg {
	m := new(mdns.Msg)
	m.SetQuestion(mdns.Fqdn(name), qtype)
	return m
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// fakeClock is a settable clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *fakeClock { return &fakeClock{now: time.Unix(1_700_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}
