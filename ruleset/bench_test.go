package ruleset

import (
	"net/netip"
	"runtime"
	"strconv"
	"testing"

	"switchyard/netx"
)

// benchSet is 200,000 domain suffixes and 50,000 CIDRs in one set.
func benchSet() *Set {
	h := headless{}
	for i := range 200000 {
		h.domainSuffix = append(h.domainSuffix, "d"+strconv.Itoa(i)+".example"+strconv.Itoa(i%97)+".com")
	}
	for i := range 50000 {
		a := netip.AddrFrom4([4]byte{byte(1 + i>>12), byte(i >> 4), byte(i << 4), 0})
		h.ipCIDR = append(h.ipCIDR, netip.PrefixFrom(a, 24))
	}
	return compile([]headless{h})
}

// BenchmarkMatchAtScale is one flow matched against the set: a name that
// misses the suffixes and an IP that misses the CIDRs (the costliest path),
// then a hit of each. bytes-held is the heap the compiled set holds.
func BenchmarkMatchAtScale(b *testing.B) {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	s := benchSet()
	runtime.GC()
	runtime.ReadMemStats(&after)
	held := float64(after.HeapAlloc) - float64(before.HeapAlloc)
	flows := []netx.Flow{
		{Network: netx.TCP, Dst: netx.DomainAddr("www.a-name-not-in-the-set.example.org", 443)},
		{Network: netx.TCP, Dst: netx.Addr{IP: netip.MustParseAddr("200.1.2.3"), Port: 443}},
		{Network: netx.TCP, Dst: netx.DomainAddr("cdn.d123456.example43.com", 443)},
		{Network: netx.TCP, Dst: netx.Addr{IP: netip.MustParseAddr("5.3.32.9"), Port: 443}},
	}
	for _, name := range []string{"miss-name", "miss-ip", "hit-name", "hit-ip"} {
		f := &flows[map[string]int{"miss-name": 0, "miss-ip": 1, "hit-name": 2, "hit-ip": 3}[name]]
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				s.Match(f)
			}
			b.ReportMetric(held, "bytes-held")
		})
	}
	runtime.KeepAlive(s)
}
