package ruleset

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
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

// BenchmarkMatchMixedCIDRs is one flow against 50,000 CIDRs of 16 lengths
// (/8 to /30, as a country's list): the layout for many lengths, the
// prefix table.
func BenchmarkMatchMixedCIDRs(b *testing.B) {
	h := headless{}
	for i := range 50000 {
		a := netip.AddrFrom4([4]byte{byte(20 + i%200), byte(i >> 4), byte(i << 4), byte(i)})
		p, _ := a.Prefix(8 + (i%16)*22/15)
		h.ipCIDR = append(h.ipCIDR, p)
	}
	s := compile([]headless{h})
	if s.dest.ips.lite == nil || len(s.dest.ips.v4) != 0 {
		b.Fatal("not the prefix-table layout")
	}
	for _, c := range []struct {
		name string
		ip   string
	}{{"miss", "1.2.3.4"}, {"hit", "25.0.0.1"}} {
		f := &netx.Flow{Network: netx.TCP, Dst: netx.Addr{IP: netip.MustParseAddr(c.ip), Port: 443}}
		if s.Match(f) != (c.name == "hit") {
			b.Fatalf("%s: %s does not %s", c.name, c.ip, c.name)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				s.Match(f)
			}
		})
	}
}

// benchSRS is the .srs of BENCH_SRS (bench/rulesets/run.sh's), or else
// 20,000 suffixes and 5,000 CIDRs compiled by the pinned sing-box.
func benchSRS(b *testing.B) []byte {
	path := os.Getenv("BENCH_SRS")
	if path == "" {
		var src strings.Builder
		src.WriteString(`{"version": 3, "rules": [{"domain_suffix": [`)
		for i := range 20000 {
			if i > 0 {
				src.WriteByte(',')
			}
			fmt.Fprintf(&src, `"d%d.example%d.com"`, i, i%97)
		}
		src.WriteString(`]}, {"ip_cidr": [`)
		for i := range 5000 {
			if i > 0 {
				src.WriteByte(',')
			}
			fmt.Fprintf(&src, `"%d.%d.%d.0/24"`, 1+i/4096, (i/16)%256, (i*16)%256)
		}
		src.WriteString("]}]}")
		dir := b.TempDir()
		in, out := filepath.Join(dir, "set.json"), filepath.Join(dir, "set.srs")
		if err := os.WriteFile(in, []byte(src.String()), 0o600); err != nil {
			b.Fatal(err)
		}
		if msg, err := exec.Command(singBox(b), "rule-set", "compile", "--output", out, in).CombinedOutput(); err != nil {
			b.Fatalf("sing-box rule-set compile: %v: %s", err, msg)
		}
		path = out
	}
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	return data
}

// BenchmarkLoadSRS compiles a .srs (bypassing the compiled-form cache):
// B/op is what one load allocates in all (its transient garbage and what
// it keeps), bytes-held what the compiled set keeps.
func BenchmarkLoadSRS(b *testing.B) {
	data := benchSRS(b)
	var s *Set
	var held uint64
	b.ReportAllocs()
	for b.Loop() {
		s = nil
		b.StopTimer()
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		b.StartTimer()
		var c compiler
		if err := parseSRS(data, &c); err != nil {
			b.Fatal(err)
		}
		s = c.finish()
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&after)
		held = after.HeapAlloc - before.HeapAlloc
		b.StartTimer()
	}
	runtime.KeepAlive(s)
	b.ReportMetric(float64(held), "bytes-held")
}
