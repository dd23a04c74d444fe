package supervisor

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	mdns "github.com/miekg/dns"

	"switchyard/config"
	"switchyard/netx"
	"switchyard/plane"
)

// A mode change decides anew which names get fake addresses (only names
// sent through a proxy do), and empties the DNS cache so that the next
// question is answered for the new mode; port-53 flows still go to the
// DNS service.
func TestAModeChangeAndTheDNS(t *testing.T) {
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var asked atomic.Int32
	srv := &mdns.Server{PacketConn: pc, Handler: mdns.HandlerFunc(func(w mdns.ResponseWriter, q *mdns.Msg) {
		asked.Add(1)
		r := new(mdns.Msg)
		r.SetReply(q)
		r.Answer = append(r.Answer, &mdns.A{Hdr: mdns.RR_Header{Name: q.Question[0].Name, Rrtype: mdns.TypeA, Class: mdns.ClassINET, Ttl: 300}, A: net.IPv4(192, 0, 2, 7)})
		w.WriteMsg(r)
	})}
	go srv.ActivateAndServe()
	t.Cleanup(func() { srv.Shutdown() })
	s, _, err := config.Parse([]byte(strings.ReplaceAll(`
[[inbounds]]
tag = "socks-in"
type = "socks"
listen = "127.0.0.1:0"

[[outbounds]]
tag = "up"
type = "socks"
server = "127.0.0.1:9"

[dns]
servers = ["udp://STUB"]
serve = true

[dns.fakeip]
ipv4 = "198.18.0.0/15"

[route]
final = "up"
`, "STUB", pc.LocalAddr().String())), "mode-dns.toml")
	if err != nil {
		t.Fatal(err)
	}
	sv, _ := run(t, s, Options{})
	ask := func() {
		t.Helper()
		if _, err := sv.QueryDNS(context.Background(), "example.test", mdns.TypeA); err != nil {
			t.Fatal(err)
		}
	}
	ask()
	ask()
	if asked.Load() != 1 {
		t.Fatalf("asked upstream %d times, want the cache to answer the second", asked.Load())
	}
	if !sv.proxied("example.test") {
		t.Fatal("rule mode: a name routed to a proxy is not proxied")
	}
	for _, c := range []struct {
		mode    plane.Mode
		proxied bool
	}{{plane.ModeDirect, false}, {plane.ModeGlobal, true}, {plane.ModeRule, true}} {
		n := asked.Load()
		if err := sv.SetMode(c.mode); err != nil {
			t.Fatal(err)
		}
		if got := sv.proxied("example.test"); got != c.proxied {
			t.Fatalf("%v mode: proxied %v, want %v", c.mode, got, c.proxied)
		}
		ask()
		if asked.Load() != n+1 {
			t.Fatalf("%v mode: the cache was not emptied by the change", c.mode)
		}
		p := sv.Plane()
		dns := netFlowTo53()
		if got, _ := p.Route(&dns); got == nil || got != p.DNS {
			t.Fatalf("%v mode: a port-53 flow did not go to the DNS service", c.mode)
		}
	}
}

func netFlowTo53() netx.Flow {
	return netx.Flow{Network: netx.UDP, Inbound: "socks-in", Dst: netx.AddrFromAddrPort(netip.MustParseAddrPort("9.9.9.9:53"))}
}
