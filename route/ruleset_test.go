package route

import (
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"switchyard/netx"
	"switchyard/spec"
)

func TestRuleSetKey(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "cn.txt")
	if err := os.WriteFile(p, []byte("DOMAIN-SUFFIX,cn\nIP-CIDR,1.2.0.0/16\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := Compile(spec.Rule{Network: "tcp", RuleSet: []spec.RuleSet{{Tag: "cn", Path: p, Format: "clash-classical"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		f    netx.Flow
		want bool
	}{
		{netx.Flow{Network: netx.TCP, Dst: netx.DomainAddr("www.gov.cn", 443)}, true},
		{netx.Flow{Network: netx.TCP, Dst: netx.Addr{IP: ip("1.2.3.4"), Port: 443}}, true},
		{netx.Flow{Network: netx.TCP, Dst: netx.Addr{IP: ip("1.3.3.4"), Port: 443}}, false},
		{netx.Flow{Network: netx.UDP, Dst: netx.DomainAddr("www.gov.cn", 443)}, false}, // AND with network
		{netx.Flow{Network: netx.TCP, Dst: netx.Addr{IP: ip("9.9.9.9"), Port: 443}, Sniffed: "x.cn"}, true},
	} {
		if got := r.Match(&c.f); got != c.want {
			t.Errorf("%v %v (sniffed %q): %v, want %v", c.f.Network, c.f.Dst, c.f.Sniffed, got, c.want)
		}
	}
	n, err := CompileNames(spec.Rule{Domain: []string{"a.example"}, RuleSet: []spec.RuleSet{{Tag: "cn", Path: p, Format: "clash-classical"}}})
	if err != nil {
		t.Fatal(err)
	}
	if !n.MatchName("Mail.QQ.cn.") || !n.MatchName("a.example") || n.MatchName("b.example") {
		t.Error("CompileNames: want the rule's names and the set's names")
	}
	if _, err := Compile(spec.Rule{RuleSet: []spec.RuleSet{{Tag: "gone", Path: filepath.Join(dir, "gone"), Format: "srs"}}}); err == nil {
		t.Error("a rule set that does not load compiled")
	}
}

// Long lists in [[rules]] are compiled into the tables rule sets use.
func TestLongListsMatch(t *testing.T) {
	var r spec.Rule
	for i := range 100 {
		r.DomainSuffix = append(r.DomainSuffix, "s"+strconv.Itoa(i)+".example")
		r.IPCIDR = append(r.IPCIDR, netipPrefix("10."+strconv.Itoa(i)+".0.0/16"))
		r.SourceIPCIDR = append(r.SourceIPCIDR, netipPrefix("192.168."+strconv.Itoa(i)+".0/24"))
	}
	r.DomainKeyword = []string{"tracker", "beacon"}
	dom, _ := Compile(spec.Rule{DomainSuffix: r.DomainSuffix, DomainKeyword: r.DomainKeyword})
	dst, _ := Compile(spec.Rule{IPCIDR: r.IPCIDR})
	src, _ := Compile(spec.Rule{SourceIPCIDR: r.SourceIPCIDR})
	yes := []struct {
		r *Rule
		f netx.Flow
	}{
		{&dom, netx.Flow{Dst: netx.DomainAddr("a.s99.example", 1)}},
		{&dom, netx.Flow{Dst: netx.DomainAddr("mybeacon.net", 1)}},
		{&dst, netx.Flow{Dst: netx.Addr{IP: ip("10.57.1.1"), Port: 1}}},
		{&src, netx.Flow{Src: netipAddrPort("192.168.42.9:7")}},
	}
	for _, c := range yes {
		if !c.r.Match(&c.f) {
			t.Errorf("%+v did not match", c.f)
		}
	}
	no := []struct {
		r *Rule
		f netx.Flow
	}{
		{&dom, netx.Flow{Dst: netx.DomainAddr("s100.example", 1)}},
		{&dst, netx.Flow{Dst: netx.Addr{IP: ip("10.100.1.1"), Port: 1}}},
		{&src, netx.Flow{Src: netipAddrPort("192.168.100.9:7")}},
	}
	for _, c := range no {
		if c.r.Match(&c.f) {
			t.Errorf("%+v matched", c.f)
		}
	}
}

func netipPrefix(s string) netip.Prefix     { return netip.MustParsePrefix(s) }
func netipAddrPort(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

// A rule set's logical rules are evaluated for each flow a [[rules]] rule
// naming the set is asked about.
func TestRuleSetLogicalRules(t *testing.T) {
	p := filepath.Join(t.TempDir(), "l.txt")
	text := "AND,((DOMAIN-SUFFIX,video.example),(NOT,((NETWORK,UDP))))\nOR,((DST-PORT,853),(DOMAIN,dot.example))\n"
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := Compile(spec.Rule{RuleSet: []spec.RuleSet{{Tag: "l", Path: p, Format: "clash-classical"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		f    netx.Flow
		want bool
	}{
		{netx.Flow{Network: netx.TCP, Dst: netx.DomainAddr("cdn.video.example", 443)}, true},
		{netx.Flow{Network: netx.UDP, Dst: netx.DomainAddr("cdn.video.example", 443)}, false},
		{netx.Flow{Network: netx.TCP, Dst: netx.Addr{IP: ip("9.9.9.9"), Port: 853}}, true},
		{netx.Flow{Network: netx.UDP, Dst: netx.DomainAddr("dot.example", 53)}, true},
		{netx.Flow{Network: netx.TCP, Dst: netx.DomainAddr("other.example", 443)}, false},
	} {
		if got := r.Match(&c.f); got != c.want {
			t.Errorf("%v %v: %v, want %v", c.f.Network, c.f.Dst, got, c.want)
		}
	}
}
