package plane_test

import (
	"errors"
	"net/netip"
	"slices"
	"testing"

	"switchyard/netx"
	"switchyard/plane"
	"switchyard/route"
	"switchyard/spec"
)

// pickFirst is a chooser with one leaf, as a group of one member.
type pickFirst struct{ leaf *plane.Target }

func (c pickFirst) Choose(*plane.Query) *plane.Target { return c.leaf }

func modePlane(t testing.TB) (*plane.Plane, map[string]*plane.Target) {
	t.Helper()
	ts := map[string]*plane.Target{
		"direct": plane.NewTarget(plane.OutboundID{Tag: "direct", Version: 1}, nil),
		"proxy":  plane.NewTarget(plane.OutboundID{Tag: "proxy", Version: 1}, nil),
		"ruled":  plane.NewTarget(plane.OutboundID{Tag: "ruled", Version: 1}, nil),
	}
	ts["grp"] = plane.NewChooserTarget(plane.OutboundID{Tag: "grp", Version: 1}, pickFirst{ts["proxy"]})
	g, err := plane.NewGlobal([]string{"grp", "ruled", "proxy", "direct"}, ts, "ruled", 1)
	if err != nil {
		t.Fatal(err)
	}
	return &plane.Plane{Final: ts["ruled"], Global: g, Direct: ts["direct"], Mode: &plane.ModeCell{},
		DNS: plane.NewTarget(plane.OutboundID{Tag: "", Version: 1}, nil)}, ts
}

func resolve(t *testing.T, p *plane.Plane, f netx.Flow) (leaf string, chain []string, rule string) {
	t.Helper()
	target, i := p.Route(&f)
	q := plane.Query{Network: f.Network, Dst: f.Dst}
	l := target.Resolve(&q)
	if l == nil {
		t.Fatalf("%s routed to %s resolved to nothing", f.Dst, target.ID())
	}
	return l.ID().Tag, q.Path(), plane.RuleName(i)
}

// Every mode routes TCP and UDP alike: rule by the rules, global to the
// GLOBAL selector's choice (its default the final), direct to direct; the
// DNS interception comes first in every mode.
func TestModesRouteEveryFlow(t *testing.T) {
	p, _ := modePlane(t)
	for _, n := range []netx.Network{netx.TCP, netx.UDP} {
		f := netx.Flow{Network: n, Inbound: "socks-in", Dst: netx.AddrFromAddrPort(netip.MustParseAddrPort("203.0.113.1:443"))}
		dns := f
		dns.Dst.Port = 53
		p.Mode.Store(plane.ModeRule)
		if leaf, _, rule := resolve(t, p, f); leaf != "ruled" || rule != "final" {
			t.Fatalf("%s rule mode: %s by %s", n, leaf, rule)
		}
		p.Mode.Store(plane.ModeGlobal)
		p.Global.Clear()
		if leaf, chain, rule := resolve(t, p, f); leaf != "ruled" || rule != "global" || !slices.Equal(chain, []string{"GLOBAL", "ruled"}) {
			t.Fatalf("%s global mode, no choice: %s by %s, chain %v", n, leaf, rule, chain)
		}
		if err := p.Global.Select("grp"); err != nil {
			t.Fatal(err)
		}
		if leaf, chain, _ := resolve(t, p, f); leaf != "proxy" || !slices.Equal(chain, []string{"GLOBAL", "grp", "proxy"}) {
			t.Fatalf("%s global mode on a group: %s, chain %v", n, leaf, chain)
		}
		if got, rule := p.Route(&dns); got != p.DNS || plane.RuleName(rule) != "dns" {
			t.Fatalf("%s global mode took a port-53 flow from the DNS service", n)
		}
		p.Mode.Store(plane.ModeDirect)
		if leaf, _, rule := resolve(t, p, f); leaf != "direct" || rule != "direct" {
			t.Fatalf("%s direct mode: %s by %s", n, leaf, rule)
		}
		if got, _ := p.Route(&dns); got != p.DNS {
			t.Fatalf("%s direct mode took a port-53 flow from the DNS service", n)
		}
	}
	// A plane without a cell routes by the rules.
	p.Mode = nil
	f := netx.Flow{Dst: netx.AddrFromAddrPort(netip.MustParseAddrPort("203.0.113.1:443"))}
	if leaf, _, _ := resolve(t, p, f); leaf != "ruled" {
		t.Fatalf("no cell: %s", leaf)
	}
}

func TestParseMode(t *testing.T) {
	for s, want := range map[string]plane.Mode{"rule": plane.ModeRule, "Global": plane.ModeGlobal, "DIRECT": plane.ModeDirect} {
		if m, err := plane.ParseMode(s); err != nil || m != want {
			t.Fatalf("%q: %v %v", s, m, err)
		}
	}
	for _, s := range []string{"", "script", "globals"} {
		if _, err := plane.ParseMode(s); !errors.Is(err, plane.ErrUnknownMode) {
			t.Fatalf("%q: %v", s, err)
		}
	}
	var c plane.ModeCell
	if !c.Store(plane.ModeGlobal) || c.Store(plane.ModeGlobal) || c.Load() != plane.ModeGlobal {
		t.Fatal("Store reports a change only when there is one")
	}
}

func TestGlobalSelectAndCarry(t *testing.T) {
	p, ts := modePlane(t)
	g := p.Global
	if g.Now() != "ruled" || !slices.Equal(g.Members(), []string{"grp", "ruled", "proxy", "direct"}) {
		t.Fatalf("now %q members %v", g.Now(), g.Members())
	}
	if err := g.Select("nope"); !errors.Is(err, plane.ErrNotGlobalMember) {
		t.Fatalf("a non-member: %v", err)
	}
	if err := g.Select("proxy"); err != nil || g.Now() != "proxy" {
		t.Fatalf("select: %v, now %q", err, g.Now())
	}
	// The next plane has proxy rebuilt (a new version of the same node):
	// the choice carries.
	ts["proxy"].SetNode([16]byte{1})
	next := map[string]*plane.Target{"ruled": ts["ruled"], "proxy": plane.NewTarget(plane.OutboundID{Tag: "proxy", Version: 2}, nil)}
	next["proxy"].SetNode([16]byte{1})
	g2, err := plane.NewGlobal([]string{"ruled", "proxy"}, next, "ruled", 2)
	if err != nil {
		t.Fatal(err)
	}
	if tag, had, carried := g2.Carry(g); !had || !carried || tag != "proxy" || g2.Now() != "proxy" {
		t.Fatalf("carry: %q %v %v, now %q", tag, had, carried, g2.Now())
	}
	// A plane where proxy is another node (removed and added back), or
	// gone: GLOBAL goes to its default.
	other := map[string]*plane.Target{"ruled": ts["ruled"], "proxy": plane.NewTarget(plane.OutboundID{Tag: "proxy", Version: 3}, nil)}
	other["proxy"].SetNode([16]byte{2})
	g3, _ := plane.NewGlobal([]string{"ruled", "proxy"}, other, "ruled", 3)
	if _, had, carried := g3.Carry(g2); !had || carried || g3.Now() != "ruled" {
		t.Fatalf("another node carried: now %q", g3.Now())
	}
	g4, _ := plane.NewGlobal([]string{"ruled"}, other, "ruled", 4)
	if _, had, carried := g4.Carry(g2); !had || carried || g4.Now() != "ruled" {
		t.Fatalf("a removed member carried: now %q", g4.Now())
	}
	g2.Clear()
	if g2.Now() != "ruled" {
		t.Fatal("Clear kept the choice")
	}
	if _, had, _ := g4.Carry(g2); had {
		t.Fatal("a cleared choice carried")
	}
	if _, err := plane.NewGlobal([]string{"ruled"}, other, "proxy", 5); !errors.Is(err, plane.ErrNotGlobalMember) {
		t.Fatalf("a default outside the members: %v", err)
	}
}

// The block rules apply in every mode; the other rules in rule mode only.
func TestBlockRulesApplyInEveryMode(t *testing.T) {
	p, ts := modePlane(t)
	block := plane.NewTarget(plane.OutboundID{Tag: "block", Version: 1}, nil)
	udp53, err := route.Compile(spec.Rule{Network: "udp", Port: []uint16{53}})
	if err != nil {
		t.Fatal(err)
	}
	tls, err := route.Compile(spec.Rule{Port: []uint16{443}})
	if err != nil {
		t.Fatal(err)
	}
	p.Rules = []plane.Rule{{Match: tls, Target: ts["proxy"]}, {Match: udp53, Target: block}}
	p.Blocks = []int{1}
	p.DNS = nil // no interception: a port-53 flow routes as any
	dns := netx.Flow{Network: netx.UDP, Inbound: "socks-in", Dst: netx.AddrFromAddrPort(netip.MustParseAddrPort("9.9.9.9:53"))}
	web := netx.Flow{Network: netx.TCP, Inbound: "socks-in", Dst: netx.AddrFromAddrPort(netip.MustParseAddrPort("9.9.9.9:443"))}
	for _, m := range []plane.Mode{plane.ModeRule, plane.ModeGlobal, plane.ModeDirect} {
		p.Mode.Store(m)
		if got, rule := p.Route(&dns); got != block || plane.RuleName(rule) != "rule 2" {
			t.Fatalf("%v: udp/53 went to %s by %s", m, got.ID(), plane.RuleName(rule))
		}
	}
	p.Mode.Store(plane.ModeDirect)
	if got, _ := p.Route(&web); got != ts["direct"] {
		t.Fatalf("direct mode applied a rule that is not a block: %s", got.ID())
	}
}
