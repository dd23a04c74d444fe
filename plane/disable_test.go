package plane_test

import (
	"net/netip"
	"testing"

	"switchyard/netx"
	"switchyard/plane"
	"switchyard/route"
	"switchyard/spec"
)

// A rule switched off matches nothing, a block rule in direct mode
// included, until it is switched on again; an index that is no rule
// changes nothing.
func TestSetDisabled(t *testing.T) {
	compile := func(r spec.Rule) route.Rule {
		t.Helper()
		c, err := route.Compile(r)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	id := func(tag string) *plane.Target { return plane.NewTarget(plane.OutboundID{Tag: tag, Version: 1}, nil) }
	final, a, block := id("final"), id("a"), id("block")
	direct := id("direct")
	p := &plane.Plane{
		Final: final,
		Rules: []plane.Rule{
			{Match: compile(spec.Rule{Port: []uint16{443}}), Target: a},
			{Match: compile(spec.Rule{Port: []uint16{443, 25}}), Target: block},
		},
		Blocks: []int{1},
	}
	f := netx.Flow{Inbound: "socks-in", Dst: netx.AddrFromAddrPort(netip.MustParseAddrPort("192.0.2.1:443"))}
	route := func() (string, int) {
		got, i := p.Route(&f)
		return got.ID().Tag, i
	}
	if tag, i := route(); tag != "a" || i != 0 {
		t.Fatalf("all on: %s %d", tag, i)
	}
	if err := p.SetDisabled(map[int]bool{0: true}); err != nil {
		t.Fatal(err)
	}
	if tag, i := route(); tag != "block" || i != 1 {
		t.Fatalf("rule 0 off: %s %d", tag, i)
	}
	if err := p.SetDisabled(map[int]bool{1: true}); err != nil {
		t.Fatal(err)
	}
	if got := p.Disabled(); len(got) != 2 || !got[0] || !got[1] {
		t.Fatalf("Disabled %v", got)
	}
	if tag, i := route(); tag != "final" || i != plane.Final {
		t.Fatalf("both off: %s %d", tag, i)
	}
	p.Mode, p.Direct = &plane.ModeCell{}, direct
	p.Mode.Store(plane.ModeDirect)
	if tag, i := route(); tag != "direct" || i != plane.RoutedDirect {
		t.Fatalf("direct mode, the block rule off: %s %d", tag, i)
	}
	if err := p.SetDisabled(map[int]bool{1: false}); err != nil {
		t.Fatal(err)
	}
	if tag, i := route(); tag != "block" || i != 1 {
		t.Fatalf("direct mode, the block rule on again: %s %d", tag, i)
	}
	if err := p.SetDisabled(map[int]bool{0: false, 2: true}); err == nil {
		t.Fatal("index 2 (the final) accepted")
	}
	if got := p.Disabled(); got[0] != true || got[1] != false {
		t.Fatalf("a refused change changed %v", got)
	}
}
