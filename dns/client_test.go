package dns

import (
	"context"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mdns "github.com/miekg/dns"

	"switchyard/netx"
)

func TestServerKinds(t *testing.T) {
	z := newZone()
	udp := startUDP(t, z)
	tcp := startTCP(t, z, "127.0.0.1:0")
	dot, dotRoots := startTLS(t, z)
	doh := startDoH(t, z)
	cases := []struct {
		url   string
		roots *x509.CertPool
	}{
		{"udp://" + udp.String(), nil},
		{"tcp://" + tcp.String(), nil},
		{"tls://" + dot.String(), dotRoots},
		{doh.URL + "/dns-query", doh.roots},
	}
	for _, c := range cases {
		t.Run(c.url, func(t *testing.T) {
			o := Options{Timeout: 2 * time.Second, RootCAs: c.roots}
			cl := NewClient(mustServer(t, c.url), o)
			defer cl.Close()
			for _, qt := range []uint16{mdns.TypeA, mdns.TypeAAAA} {
				q := question("a.test", qt)
				q.Id = 4242
				resp, err := cl.Exchange(ctxT(t), q)
				if err != nil {
					t.Fatalf("%s: %v", mdns.Type(qt), err)
				}
				if resp.Id != 4242 || len(resp.Answer) != 1 || resp.Answer[0].Header().Rrtype != qt {
					t.Fatalf("%s: answer %v", mdns.Type(qt), resp)
				}
			}
			r := New([]Server{mustServer(t, c.url)}, o)
			defer r.Close()
			ips, err := r.LookupIP(ctxT(t), "a.test")
			if err != nil || !slices.Equal(ips, addrs("192.0.2.1", "2001:db8::1")) {
				t.Fatalf("LookupIP = %v, %v", ips, err)
			}
		})
	}
	if _, ok := doh.protos.Load("HTTP/2.0"); !ok {
		t.Error("DoH did not use HTTP/2")
	}
	if _, ok := doh.protos.Load("HTTP/1.1"); ok {
		t.Error("DoH used HTTP/1.1")
	}
}

func TestDoHReusesOneConnection(t *testing.T) {
	z := newZone()
	var conns atomic.Int64
	doh := startDoH(t, z, func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	})
	r := newResolver(t, Options{RootCAs: doh.roots}, doh.URL+"/dns-query")
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Go(func() {
			if _, err := r.LookupIP(ctxT(t), "n"+string(rune('a'+i))+".test"); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if _, err := r.LookupIP(ctxT(t), "later.test"); err != nil {
		t.Fatal(err)
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d connections, want 1", n)
	}
	if n := doh.posts.Load(); n != 22 {
		t.Errorf("%d queries, want 22", n)
	}
}

func TestSystemLocalhost(t *testing.T) {
	r := newResolver(t, Options{}, "system")
	ips, ttl, err := r.LookupIPTTL(ctxT(t), "localhost")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(ips, netip.Addr.IsLoopback) {
		t.Fatalf("localhost = %v", ips)
	}
	if ttl > netx.DefaultTTL || ttl < netx.DefaultTTL-time.Second {
		t.Errorf("TTL %v, want %v", ttl, netx.DefaultTTL)
	}
	resp, err := r.Exchange(ctxT(t), question("localhost", mdns.TypeMX))
	if err != nil || resp.Rcode != mdns.RcodeNotImplemented {
		t.Fatalf("MX = %v, %v", resp, err)
	}
	_, err = r.LookupIP(ctxT(t), "does-not-exist.invalid")
	if !errors.Is(err, ErrNXDomain) {
		t.Errorf("a name under .invalid: %v", err)
	}
}

func TestTruncatedRetriesOverTCP(t *testing.T) {
	z := newZone()
	a := startUDPAndTCP(t, z)
	r := newResolver(t, Options{Timeout: 2 * time.Second}, "udp://"+a.String())
	ips, err := r.LookupIP(ctxT(t), "tc.test")
	if err != nil || !slices.Equal(ips, addrs("192.0.2.4")) {
		t.Fatalf("LookupIP = %v, %v", ips, err)
	}
	resp, err := r.Exchange(ctxT(t), question("tc.test", mdns.TypeA))
	if err != nil || resp.Truncated || len(resp.Answer) != 1 {
		t.Fatalf("Exchange = %v, %v", resp, err)
	}
	// A then AAAA, each over UDP and again over TCP; the Exchange was
	// answered from the cache.
	if n := z.count("tc.test.", mdns.TypeA); n != 2 {
		t.Errorf("%d A queries, want 2 (udp, tcp)", n)
	}
}

func TestDeadFirstServer(t *testing.T) {
	z := newZone()
	live := startUDP(t, z)
	const timeout = 300 * time.Millisecond
	for _, dead := range []string{"udp://" + deadUDP(t).String(), "tcp://" + refusingTCP(t).String()} {
		t.Run(dead, func(t *testing.T) {
			r := newResolver(t, Options{Timeout: timeout}, dead, "udp://"+live.String())
			start := time.Now()
			ips, err := r.LookupIP(ctxT(t), "a.test")
			took := time.Since(start)
			if err != nil || len(ips) != 2 {
				t.Fatalf("LookupIP = %v, %v", ips, err)
			}
			if took > timeout+time.Second/2 {
				t.Errorf("answered after %v", took)
			}
			// The dead server is now asked last: the next question
			// costs no timeout.
			start = time.Now()
			if _, err := r.LookupIP(ctxT(t), "other.test"); err != nil {
				t.Fatal(err)
			}
			if took := time.Since(start); took >= timeout {
				t.Errorf("the second question took %v", took)
			}
			s := r.Stats()
			if s.Servers[0].Failures == 0 || s.Servers[1].Exchanges != 4 {
				t.Errorf("stats %+v", s.Servers)
			}
		})
	}
}

func TestAllServersDead(t *testing.T) {
	r := newResolver(t, Options{Timeout: 200 * time.Millisecond}, "udp://"+deadUDP(t).String(), "tcp://"+refusingTCP(t).String())
	_, err := r.LookupIP(ctxT(t), "a.test")
	if err == nil {
		t.Fatal("no error")
	}
	if _, err := r.Exchange(ctxT(t), question("a.test", mdns.TypeA)); err == nil {
		t.Fatal("Exchange: no error")
	}
	if s := r.Stats(); s.Failures != 2 || s.Queries != 2 {
		t.Errorf("stats %+v", s)
	}
}

// countingDialer counts the sockets it opens, by network.
type countingDialer struct {
	d    Dialer
	mu   sync.Mutex
	dial map[string]int
}

func (c *countingDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	c.mu.Lock()
	if c.dial == nil {
		c.dial = map[string]int{}
	}
	c.dial[network]++
	c.mu.Unlock()
	return c.d.DialContext(ctx, network, address)
}

func (c *countingDialer) count(network string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dial[network]
}

func TestDialerSeesEverySocket(t *testing.T) {
	z := newZone()
	both := startUDPAndTCP(t, z)
	dot, roots := startTLS(t, z)
	doh := startDoH(t, z)
	pool := roots.Clone()
	pool.AddCert(doh.Certificate())

	var mu sync.Mutex
	hooked := map[string]int{}
	policy := netx.SocketPolicy{Hook: func(si netx.SocketInfo) error {
		mu.Lock()
		hooked[si.Network]++
		mu.Unlock()
		return nil
	}}
	cd := &countingDialer{d: PolicyDialer(netx.NewDialer(policy, 0))}
	for _, u := range []string{"udp://" + both.String(), "tls://" + dot.String(), doh.URL + "/dns-query"} {
		r := New(servers(t, u), Options{Dialer: cd, RootCAs: pool, Timeout: 2 * time.Second})
		if _, err := r.LookupIP(ctxT(t), "tc.test"); err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		r.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	// udp: A and AAAA over one shared UDP socket, the truncated A again
	// over TCP; tls: one stream or two (A and AAAA at once); https: one
	// connection.
	if hooked["udp4"] != 1 || cd.count("udp") != 1 {
		t.Errorf("udp sockets: hook saw %d, dialer %d; want 1", hooked["udp4"], cd.count("udp"))
	}
	if hooked["tcp4"] != cd.count("tcp") || cd.count("tcp") < 3 {
		t.Errorf("tcp sockets: hook saw %d, dialer %d", hooked["tcp4"], cd.count("tcp"))
	}
	if len(hooked) != 2 {
		t.Errorf("hooked %v", hooked)
	}
}

func TestPolicyRefusalFailsTheQuery(t *testing.T) {
	z := newZone()
	a := startUDP(t, z)
	refuse := errors.New("refused by hook")
	d := PolicyDialer(netx.NewDialer(netx.SocketPolicy{Hook: func(netx.SocketInfo) error { return refuse }}, 0))
	r := newResolver(t, Options{Dialer: d, Timeout: time.Second}, "udp://"+a.String())
	if _, err := r.LookupIP(ctxT(t), "a.test"); !errors.Is(err, refuse) {
		t.Fatalf("err = %v", err)
	}
	if z.total() != 0 {
		t.Error("a query went out")
	}
}

// countingBootstrap answers every name with its current addresses.
type countingBootstrap struct {
	mu    sync.Mutex
	ips   []netip.Addr
	calls []string
}

func (b *countingBootstrap) LookupIP(_ context.Context, host string) ([]netip.Addr, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls = append(b.calls, host)
	return slices.Clone(b.ips), nil
}

func (b *countingBootstrap) set(ips ...netip.Addr) {
	b.mu.Lock()
	b.ips = ips
	b.mu.Unlock()
}

func (b *countingBootstrap) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.calls)
}

func TestBootstrapResolvesOnce(t *testing.T) {
	z := newZone()
	a := startUDPAndTCP(t, z)
	port := ":" + itoa(a.Port())
	dot, roots := startTLS(t, z)
	for _, u := range []string{"udp://DNS.test" + port, "tcp://dns.test" + port, "tls://dns.test:" + itoa(dot.Port())} {
		t.Run(u, func(t *testing.T) {
			b := &countingBootstrap{ips: addrs("127.0.0.1")}
			r := newResolver(t, Options{Bootstrap: b, RootCAs: roots, Timeout: time.Second}, u)
			for _, name := range []string{"a.test", "b.test", "c.test"} {
				if _, err := r.LookupIP(ctxT(t), name); err != nil {
					t.Fatal(err)
				}
			}
			if b.count() != 1 || b.calls[0] != "dns.test" {
				t.Errorf("bootstrap asked %v", b.calls)
			}
		})
	}
}

func TestBootstrapAgainAfterFailure(t *testing.T) {
	z := newZone()
	a := startUDP(t, z)
	// 127.0.0.2 is loopback too, but nothing listens there: the query
	// is refused.
	b := &countingBootstrap{ips: addrs("127.0.0.2")}
	r := newResolver(t, Options{Bootstrap: b, Timeout: 500 * time.Millisecond}, "udp://dns.test:"+itoa(a.Port()))
	if _, err := r.Exchange(ctxT(t), question("a.test", mdns.TypeA)); err == nil {
		t.Fatal("the dead address answered")
	}
	b.set(netip.MustParseAddr("127.0.0.1"))
	for range 2 {
		if _, err := r.LookupIP(ctxT(t), "b.test"); err != nil {
			t.Fatal(err)
		}
	}
	if b.count() != 2 {
		t.Errorf("bootstrap asked %d times, want 2", b.count())
	}
}

func TestBootstrapTriesEachAddress(t *testing.T) {
	z := newZone()
	a := startUDP(t, z)
	b := &countingBootstrap{ips: addrs("127.0.0.2", "127.0.0.1")}
	r := newResolver(t, Options{Bootstrap: b, Timeout: 500 * time.Millisecond}, "udp://dns.test:"+itoa(a.Port()))
	r.LookupIP(ctxT(t), "a.test") // 127.0.0.2 refuses
	if _, err := r.LookupIP(ctxT(t), "b.test"); err != nil {
		t.Fatal(err)
	}
	if b.count() != 1 {
		t.Errorf("bootstrap asked %d times, want 1", b.count())
	}
}

func itoa(p uint16) string { return strconv.Itoa(int(p)) }
