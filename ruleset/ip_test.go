package ruleset

import (
	"math/rand/v2"
	"net/netip"
	"testing"
)

// TestIPTableMatchesPrefixes checks both layouts (few lengths: hash sets
// per length; many: the prefix table) against Prefix.Contains.
func TestIPTableMatchesPrefixes(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	randAddr := func() netip.Addr {
		var a [4]byte
		for i := range a {
			a[i] = byte(rnd.IntN(4)) // a small space, so that hits happen
		}
		return netip.AddrFrom4(a)
	}
	for _, lens := range [][]int{{24}, {32, 16}, {0}, {8, 30, 31, 32}, {1, 2, 3, 5, 8, 12, 16, 20, 24, 28, 32}} {
		var ps []netip.Prefix
		for range 40 {
			p, _ := randAddr().Prefix(lens[rnd.IntN(len(lens))])
			ps = append(ps, p)
		}
		ps = append(ps, netip.MustParsePrefix("fd00::/8"))
		tab := prefixTable(ps, nil)
		if many := len(lens) > maxLens; (tab.lite != nil && len(tab.v4) == 0) != many {
			t.Errorf("lengths %v: layout v4 sets %d, prefix table %v", lens, len(tab.v4), tab.lite != nil)
		}
		for range 2000 {
			a := randAddr()
			want := false
			for _, p := range ps {
				want = want || p.Contains(a)
			}
			if got := tab.Lookup(a); got != want {
				t.Fatalf("lengths %v: %v: %v, want %v", lens, a, got, want)
			}
		}
		if !tab.Lookup(netip.MustParseAddr("fd12::1")) || tab.Lookup(netip.MustParseAddr("fe80::1")) {
			t.Errorf("lengths %v: IPv6 beside the IPv4 sets", lens)
		}
	}
	var none *ipTable
	if none.Lookup(netip.MustParseAddr("1.2.3.4")) {
		t.Error("an empty table matches")
	}
}

// appendRange's prefixes tile the range exactly, in order, each as large
// as the range and its alignment allow.
func TestAppendRangeTiles(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 4))
	check := func(from, to netip.Addr) {
		ps := appendRange(nil, from, to)
		next := from
		for i, p := range ps {
			if p.Addr() != next || p.Masked() != p {
				t.Fatalf("%v-%v: prefix %d %v does not start at %v aligned", from, to, i, p, next)
			}
			last := u128Of(p.Addr()).or(ones(p.Addr().BitLen() - p.Bits()))
			if last.greater(u128Of(to)) {
				t.Fatalf("%v-%v: %v passes the end", from, to, p)
			}
			if p.Bits() > 0 {
				if wider, _ := p.Addr().Prefix(p.Bits() - 1); wider.Addr() == p.Addr() &&
					!u128Of(p.Addr()).or(ones(p.Addr().BitLen()-p.Bits()+1)).greater(u128Of(to)) {
					t.Fatalf("%v-%v: %v could be %v", from, to, p, wider)
				}
			}
			next = last.next().addr(p.Addr().BitLen())
			if i == len(ps)-1 && last != u128Of(to) {
				t.Fatalf("%v-%v: ends at %v", from, to, p)
			}
		}
	}
	check(netip.MustParseAddr("0.0.0.0"), netip.MustParseAddr("255.255.255.255"))
	check(netip.MustParseAddr("0.0.0.1"), netip.MustParseAddr("255.255.255.254"))
	check(netip.MustParseAddr("::"), netip.MustParseAddr("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"))
	check(netip.MustParseAddr("::1"), netip.MustParseAddr("ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe"))
	for range 2000 {
		a, b := rnd.Uint32(), rnd.Uint32()
		if a > b {
			a, b = b, a
		}
		var x, y [4]byte
		for i := range 4 {
			x[i], y[i] = byte(a>>(24-8*i)), byte(b>>(24-8*i))
		}
		check(netip.AddrFrom4(x), netip.AddrFrom4(y))
		var p, q [16]byte
		for i := range 16 {
			p[i] = byte(rnd.Uint32())
		}
		q = p
		q[rnd.IntN(16)] |= byte(rnd.Uint32())
		if netip.AddrFrom16(q).Less(netip.AddrFrom16(p)) {
			p, q = q, p
		}
		check(netip.AddrFrom16(p), netip.AddrFrom16(q))
	}
}
