package plane_test

import (
	"net/netip"
	"testing"

	"switchyard/netx"
	"switchyard/plane"
	"switchyard/route"
	"switchyard/spec"
)

// BenchmarkRouteByMode is the routing of one flow past 100 rules that do
// not match, by mode: the mode's own cost is one atomic load; global and
// direct skip the rules. It allocates nothing.
func BenchmarkRouteByMode(b *testing.B) {
	p, _ := modePlane(b)
	for i := range 100 {
		m, err := route.Compile(spec.Rule{Port: []uint16{uint16(1000 + i)}})
		if err != nil {
			b.Fatal(err)
		}
		p.Rules = append(p.Rules, plane.Rule{Match: m, Target: p.Final})
	}
	f := netx.Flow{Network: netx.TCP, Inbound: "socks-in", Dst: netx.AddrFromAddrPort(netip.MustParseAddrPort("203.0.113.1:443"))}
	for _, m := range []plane.Mode{plane.ModeRule, plane.ModeGlobal, plane.ModeDirect} {
		b.Run(m.String(), func(b *testing.B) {
			p.Mode.Store(m)
			b.ReportAllocs()
			var q plane.Query // reused, as an association reuses its own
			for b.Loop() {
				q.Network, q.Dst = netx.TCP, f.Dst
				t, _ := p.Route(&f)
				if t.Resolve(&q) == nil {
					b.Fatal("no leaf")
				}
			}
		})
	}
}
