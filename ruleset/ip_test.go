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
