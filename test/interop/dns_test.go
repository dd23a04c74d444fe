package interop

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	mdns "github.com/miekg/dns"

	"switchyard/test/socksclient"
)

// The DNS service and fake IPs end to end: port-53 flows from a SOCKS5
// client are answered in-process by the resolvers of [dns] (a local stub
// here), DNS rules pick the resolver per name, a block rule answers
// NXDOMAIN, and a name sent through a proxy gets a fake address whose flows
// reach the proxy as the name.

// dnsStub is a DNS server on loopback (UDP and TCP on one port) answering
// A questions from its table and counting what it was asked.
type dnsStub struct {
	addr string
	mu   sync.Mutex
	asks map[string]int
	from map[string]string // the last source address per name
}

func startDNSStub(t *testing.T, answers map[string]string) *dnsStub {
	t.Helper()
	s := &dnsStub{asks: map[string]int{}, from: map[string]string{}}
	h := mdns.HandlerFunc(func(w mdns.ResponseWriter, q *mdns.Msg) {
		r := new(mdns.Msg)
		r.SetReply(q)
		if len(q.Question) == 1 {
			name := strings.TrimSuffix(q.Question[0].Name, ".")
			s.mu.Lock()
			s.asks[name]++
			s.from[name] = w.RemoteAddr().String()
			s.mu.Unlock()
			if ip, ok := answers[name]; ok && q.Question[0].Qtype == mdns.TypeA {
				r.Answer = append(r.Answer, &mdns.A{Hdr: mdns.RR_Header{Name: q.Question[0].Name, Rrtype: mdns.TypeA, Class: mdns.ClassINET, Ttl: 60}, A: net.ParseIP(ip)})
			} else if !ok {
				r.Rcode = mdns.RcodeNameError
			}
		}
		w.WriteMsg(r)
	})
	// One port for UDP and TCP: a UDP port whose TCP twin is taken is
	// tried again.
	var (
		pc  net.PacketConn
		ln  net.Listener
		err error
	)
	for try := 0; ; try++ {
		if pc, err = net.ListenPacket("udp4", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		if ln, err = net.Listen("tcp4", pc.LocalAddr().String()); err == nil {
			break
		}
		pc.Close()
		if try == 20 {
			t.Fatal(err)
		}
	}
	us := &mdns.Server{PacketConn: pc, Handler: h}
	ts := &mdns.Server{Listener: ln, Handler: h}
	go us.ActivateAndServe()
	go ts.ActivateAndServe()
	t.Cleanup(func() { us.Shutdown(); ts.Shutdown() })
	s.addr = pc.LocalAddr().String()
	return s
}

func (s *dnsStub) asked(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.asks[name]
}

// queryUDP asks name (type A) through the SOCKS5 proxy of a datagram to
// server and returns the answer.
func queryUDP(t *testing.T, proxy, server, name string) *mdns.Msg {
	t.Helper()
	a, err := socksclient.Associate(proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	q := new(mdns.Msg)
	q.SetQuestion(mdns.Fqdn(name), mdns.TypeA)
	b, _ := q.Pack()
	for try := 0; try < 3; try++ {
		a.Send(server, b)
		from, payload, ok := a.Recv(2 * time.Second)
		if !ok {
			continue
		}
		if from != server {
			t.Fatalf("the answer came from %s, not %s", from, server)
		}
		r := new(mdns.Msg)
		if err := r.Unpack(payload); err != nil {
			t.Fatal(err)
		}
		return r
	}
	t.Fatalf("no answer to %s from %s", name, server)
	return nil
}

// queryTCP asks name over a SOCKS5 CONNECT to server.
func queryTCP(t *testing.T, proxy, server, name string) *mdns.Msg {
	t.Helper()
	c, err := socksclient.Dial(proxy, server, "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	q := new(mdns.Msg)
	q.SetQuestion(mdns.Fqdn(name), mdns.TypeA)
	b, _ := q.Pack()
	if _, err := c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(b))), b...)); err != nil {
		t.Fatal(err)
	}
	var n [2]byte
	if _, err := io.ReadFull(c, n[:]); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, binary.BigEndian.Uint16(n[:]))
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatal(err)
	}
	r := new(mdns.Msg)
	if err := r.Unpack(buf); err != nil {
		t.Fatal(err)
	}
	return r
}

func firstA(r *mdns.Msg) string {
	for _, rr := range r.Answer {
		if a, ok := rr.(*mdns.A); ok {
			return a.A.String()
		}
	}
	return ""
}

func TestTheDNSServiceAnswersPort53FlowsInProcess(t *testing.T) {
	main := startDNSStub(t, map[string]string{"example.test": "192.0.2.1"})
	other := startDNSStub(t, map[string]string{"corp.test": "192.0.2.9"})
	sv, proxy := runConfig(t, fmt.Sprintf(`
[dns]
servers = ["udp://%s"]
serve = true

[[dns.rules]]
domain_suffix = ["corp.test"]
servers = ["tcp://%s"]

[[dns.rules]]
domain = ["ads.test"]
action = "block"

[[inbounds]]
tag = "socks-in"
type = "socks"
listen = "127.0.0.1:0"
udp = true

[[outbounds]]
tag = "dns-out"
type = "dns"

[[rules]]
port = [5353]
outbound = "dns-out"

[route]
final = "direct"
`, main.addr, other.addr))
	// A rule sends any flow to the service with the dns outbound.
	if got := firstA(queryUDP(t, proxy, "127.0.0.1:5353", "example.test")); got != "192.0.2.1" {
		t.Fatalf("UDP routed to the dns outbound: %q", got)
	}
	// 1.1.1.1:53 is never reached: the service answers from the stub.
	if got := firstA(queryUDP(t, proxy, "1.1.1.1:53", "example.test")); got != "192.0.2.1" {
		t.Fatalf("UDP to 1.1.1.1:53: %q", got)
	}
	if got := firstA(queryTCP(t, proxy, "1.1.1.1:53", "example.test")); got != "192.0.2.1" {
		t.Fatalf("TCP to 1.1.1.1:53: %q", got)
	}
	if got := firstA(queryUDP(t, proxy, "9.9.9.9:53", "www.corp.test")); got != "" || other.asked("www.corp.test") == 0 {
		// www.corp.test is not in the table: NXDOMAIN, but asked of "other".
		t.Fatalf("a rule's name: answer %q, other stub asked %d times", got, other.asked("www.corp.test"))
	}
	if main.asked("www.corp.test") != 0 {
		t.Fatal("a rule's name was asked of the default resolver")
	}
	if r := queryUDP(t, proxy, "1.1.1.1:53", "ads.test"); r.Rcode != mdns.RcodeNameError || main.asked("ads.test")+other.asked("ads.test") != 0 {
		t.Fatalf("a blocked name: rcode %d, asked upstream %d times", r.Rcode, main.asked("ads.test")+other.asked("ads.test"))
	}
	// What was asked is counted where the API will read it; a second
	// question for a cached name is a cache hit.
	queryUDP(t, proxy, "1.1.1.1:53", "example.test")
	resolvers, service, ok := sv.DNSStats()
	var hits uint64
	for _, r := range resolvers {
		hits += r.CacheHits
	}
	if !ok || hits == 0 || service.Queries < 5 {
		t.Fatalf("stats: ok %v, cache hits %d, service queries %d", ok, hits, service.Queries)
	}
}

func TestAFakeIPFlowReachesTheProxyAsTheName(t *testing.T) {
	stub := startDNSStub(t, map[string]string{"echo.test": "127.0.0.1"})
	port := freePort(t)
	peer := startKillablePeer(t, "xray", xraySocks(port), port)
	cfg := fmt.Sprintf(`
[dns]
servers = ["udp://%s"]
serve = true

[dns.fakeip]
ipv4 = "198.18.0.0/15"

[[inbounds]]
tag = "socks-in"
type = "socks"
listen = "127.0.0.1:0"
udp = true

[[outbounds]]
tag = "up"
type = "socks"
server = "127.0.0.1:%d"

[[rules]]
domain_suffix = ["test"]
outbound = "up"

[route]
final = "direct"
`, stub.addr, port)
	sv, proxy := runConfig(t, cfg)
	fake := firstA(queryUDP(t, proxy, "1.1.1.1:53", "echo.test"))
	ip, err := netip.ParseAddr(fake)
	if err != nil || !netip.MustParsePrefix("198.18.0.0/15").Contains(ip) {
		t.Fatalf("echo.test answered %q, want an address of the fake range", fake)
	}
	if stub.asked("echo.test") != 0 {
		t.Fatal("a proxied name was asked upstream for a fake answer")
	}
	echo := tcpEcho(t)
	_, echoPort, _ := net.SplitHostPort(echo)
	c, err := socksclient.Dial(proxy, net.JoinHostPort(fake, echoPort), "", "")
	if err != nil {
		t.Fatalf("CONNECT to the fake address: %v", err)
	}
	c.Close()
	deadline := time.Now().Add(3 * time.Second)
	for !strings.Contains(peer.logs.String(), "accepted tcp:echo.test:"+echoPort) {
		if time.Now().After(deadline) {
			t.Fatalf("the proxy did not see the name:\n%s", peer.logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A fake address no name maps to is refused, never dialed.
	if _, err := socksclient.Dial(proxy, net.JoinHostPort("198.18.200.7", echoPort), "", ""); err == nil {
		t.Fatal("a fake address with no mapping was connected")
	}
	_ = sv
}

// Split resolution: the proxy server's name is asked of pre_proxy
// directly; a direct destination's name is asked of through_proxy through
// the route table, here through a real proxy server (the through_proxy
// stub's query arrives by way of Xray, which logs it).
func TestSplitDNSAsksEachSideOfItsOwnServers(t *testing.T) {
	port := freePort(t)
	peer := startKillablePeer(t, "xray", xraySocks(port), port)
	pre := startDNSStub(t, map[string]string{"proxy.test": "127.0.0.1"})
	through := startDNSStub(t, map[string]string{"direct.test": "127.0.0.1"})
	_, proxy := runConfig(t, fmt.Sprintf(`
[dns]
pre_proxy = ["udp://%s"]
through_proxy = ["tcp://%s"]

[[inbounds]]
tag = "socks-in"
type = "socks"
listen = "127.0.0.1:0"

[[outbounds]]
tag = "up"
type = "socks"
server = "proxy.test:%d"

[[rules]]
domain = ["direct.test"]
outbound = "direct"

[route]
final = "up"
`, pre.addr, through.addr, port))
	echo := tcpEcho(t)
	_, echoPort, _ := net.SplitHostPort(echo)
	// Through the proxy: its server's name comes from pre_proxy.
	checkTCPTo(t, proxy, echo)
	if pre.asked("proxy.test") == 0 || through.asked("proxy.test") != 0 {
		t.Fatalf("proxy.test asked of pre_proxy %d times, of through_proxy %d times", pre.asked("proxy.test"), through.asked("proxy.test"))
	}
	// Direct: the destination's name comes from through_proxy, asked
	// through the route table (final: the proxy).
	checkTCPTo(t, proxy, net.JoinHostPort("direct.test", echoPort))
	if through.asked("direct.test") == 0 || pre.asked("direct.test") != 0 {
		t.Fatalf("direct.test asked of through_proxy %d times, of pre_proxy %d times", through.asked("direct.test"), pre.asked("direct.test"))
	}
	if !strings.Contains(peer.logs.String(), "accepted tcp:"+through.addr) {
		t.Fatalf("the through_proxy query did not go through the proxy:\n%s", peer.logs)
	}
}

// The fake IP table survives a restart: an address handed out before it
// still carries its name after it.
func TestFakeIPsSurviveARestart(t *testing.T) {
	stub := startDNSStub(t, nil)
	port := freePort(t)
	peer := startKillablePeer(t, "xray", xraySocks(port), port)
	state := filepath.Join(t.TempDir(), "state.db")
	cfg := fmt.Sprintf(`
[state]
path = %q

[dns]
servers = ["udp://%s"]
serve = true

[dns.fakeip]
ipv4 = "198.18.0.0/15"

[[inbounds]]
tag = "socks-in"
type = "socks"
listen = "127.0.0.1:0"
udp = true

[[outbounds]]
tag = "up"
type = "socks"
server = "127.0.0.1:%d"

[route]
final = "up"
`, state, stub.addr, port)
	sv, proxy := runConfigStore(t, cfg)
	fake := firstA(queryUDP(t, proxy, "1.1.1.1:53", "kept.test"))
	if fake == "" {
		t.Fatal("no fake answer")
	}
	sv.stop()
	_, proxy2 := runConfigStore(t, cfg)
	echo := tcpEcho(t)
	_, echoPort, _ := net.SplitHostPort(echo)
	c, err := socksclient.Dial(proxy2, net.JoinHostPort(fake, echoPort), "", "")
	if err != nil {
		t.Fatalf("CONNECT to the fake address after the restart: %v", err)
	}
	c.Close()
	deadline := time.Now().Add(3 * time.Second)
	for !strings.Contains(peer.logs.String(), "accepted tcp:kept.test:"+echoPort) {
		if time.Now().After(deadline) {
			t.Fatalf("after the restart the proxy did not see the name:\n%s", peer.logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
