package plane_test

import (
	"errors"
	"net/netip"
	"testing"

	"switchyard/netx"
	"switchyard/plane"
)

type fakes map[netip.Addr]string

func (f fakes) Contains(ip netip.Addr) bool {
	return netip.MustParsePrefix("198.18.0.0/15").Contains(ip)
}

func (f fakes) Name(ip netip.Addr) (string, bool) { n, ok := f[ip]; return n, ok }

// A flow from an inbound toward port 53 goes to the DNS service before any
// rule; the process's own queries (no inbound) route as any flow.
func TestPort53FlowsGoToTheDNSService(t *testing.T) {
	final := plane.NewTarget(plane.OutboundID{Tag: "direct", Version: 1}, nil)
	svc := plane.NewTarget(plane.OutboundID{Tag: "", Version: 1}, nil)
	p := &plane.Plane{Final: final, DNS: svc}
	f := netx.Flow{Inbound: "socks-in", Dst: netx.AddrFromAddrPort(netip.MustParseAddrPort("1.1.1.1:53"))}
	if got, rule := p.Route(&f); got != svc || plane.RuleName(rule) != "dns" {
		t.Fatalf("port 53 from an inbound: %v %s", got.ID(), plane.RuleName(rule))
	}
	own := netx.Flow{Dst: f.Dst}
	if got, _ := p.Route(&own); got != final {
		t.Fatal("the process's own query was taken by the service")
	}
	f.Dst.Port = 443
	if got, _ := p.Route(&f); got != final {
		t.Fatal("a port-443 flow went to the DNS service")
	}
}

// A destination in the fake range gets its name back; one with no mapping
// is refused; any other passes untouched.
func TestUnfake(t *testing.T) {
	p := &plane.Plane{FakeIPs: fakes{netip.MustParseAddr("198.18.0.5"): "example.test"}}
	got, err := p.Unfake(netx.AddrFromAddrPort(netip.MustParseAddrPort("198.18.0.5:443")))
	if err != nil || got.Name != "example.test" || got.Port != 443 {
		t.Fatalf("mapped: %v %v", got, err)
	}
	if _, err := p.Unfake(netx.AddrFromAddrPort(netip.MustParseAddrPort("198.18.0.6:443"))); !errors.Is(err, plane.ErrNoFakeIPMapping) {
		t.Fatalf("unmapped: %v", err)
	}
	real := netx.AddrFromAddrPort(netip.MustParseAddrPort("203.0.113.1:443"))
	if got, err := p.Unfake(real); err != nil || got != real {
		t.Fatalf("outside the range: %v %v", got, err)
	}
}

// Hit counts flows per rule and for the final target; Hits reads them in
// rule order, the final's last.
func TestRuleHits(t *testing.T) {
	p := &plane.Plane{Rules: make([]plane.Rule, 2)}
	p.Hit(1)
	p.Hit(1)
	p.Hit(plane.Final)
	p.Hit(plane.Intercepted)
	if got := p.Hits(); len(got) != 3 || got[0] != 0 || got[1] != 2 || got[2] != 1 {
		t.Fatalf("hits %v", got)
	}
}
