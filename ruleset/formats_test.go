package ruleset

import (
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"switchyard/netx"
)

// One fixture set in every format: exact example.org, suffix google.com,
// keyword adsrv, CIDRs 10.0.0.0/8 and fd00::/8.
var fixtures = map[string]string{
	"source": `{
  "version": 2,
  "rules": [
    {"domain": ["example.org"], "domain_suffix": ["google.com"], "domain_keyword": "adsrv"},
    {"ip_cidr": ["10.0.0.0/8", "fd00::/8"]}
  ]
}`,
	"clash-domain":    "# a list\nexample.org\n+.google.com\n",
	"clash-ipcidr":    "10.0.0.0/8\nfd00::/8\n",
	"clash-classical": "DOMAIN,example.org\nDOMAIN-SUFFIX,google.com\nDOMAIN-KEYWORD,adsrv\nIP-CIDR,10.0.0.0/8,no-resolve\nIP-CIDR6,fd00::/8\n",
}

var yamlFixtures = map[string]string{
	"clash-domain":    "payload:\n  - 'example.org'\n  - \"+.google.com\"\n",
	"clash-ipcidr":    "payload:\n  - 10.0.0.0/8\n  - 'fd00::/8'\n",
	"clash-classical": "payload:\n  - DOMAIN,example.org\n  - DOMAIN-SUFFIX,google.com\n  - DOMAIN-KEYWORD,adsrv\n  - IP-CIDR,10.0.0.0/8\n  - IP-CIDR6,fd00::/8\n",
}

func flowName(n string) *netx.Flow {
	f := netx.Flow{Network: netx.TCP, Dst: netx.DomainAddr(n, 443)}
	return &f
}

func flowIP(s string) *netx.Flow {
	f := netx.Flow{Network: netx.TCP, Dst: netx.Addr{IP: netip.MustParseAddr(s), Port: 443}}
	return &f
}

// checkFixture asserts the fixture's semantics; domains/ips say which
// halves the format holds.
func checkFixture(t *testing.T, name string, s *Set, domains, keyword, ips bool) {
	t.Helper()
	cases := []struct {
		f    *netx.Flow
		want bool
	}{
		{flowName("example.org"), domains},
		{flowName("EXAMPLE.org."), domains},
		{flowName("www.example.org"), false},
		{flowName("google.com"), domains},
		{flowName("mail.google.com"), domains},
		{flowName("notgoogle.com"), false},
		{flowName("x.adsrv.net"), keyword},
		{flowName("example.com"), false},
		{flowIP("10.200.0.1"), ips},
		{flowIP("11.0.0.1"), false},
		{flowIP("fd12::1"), ips},
		{flowIP("fe80::1"), false},
	}
	for _, c := range cases {
		if got := s.Match(c.f); got != c.want {
			t.Errorf("%s: %v matches %v, want %v", name, c.f.Dst, got, c.want)
		}
	}
}

func TestFormatsMatchTheSameFixture(t *testing.T) {
	for _, set := range []map[string]string{fixtures, yamlFixtures} {
		for format, text := range set {
			s, err := Parse(format+".txt", format, []byte(text))
			if err != nil {
				t.Fatalf("%s: %v", format, err)
			}
			switch format {
			case "source", "clash-classical":
				checkFixture(t, format, s, true, true, true)
			case "clash-domain":
				checkFixture(t, format, s, true, false, false)
			case "clash-ipcidr":
				checkFixture(t, format, s, false, false, true)
			}
		}
	}
}

func TestClashWildcards(t *testing.T) {
	s, err := Parse("w.txt", "clash-domain", []byte("+.a.com\n.b.com\n*.c.com\nd.*.com\n"))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{
		"a.com": true, "x.y.a.com": true,
		"b.com": false, "x.b.com": true, "x.y.b.com": true,
		"c.com": false, "x.c.com": true, "x.y.c.com": false,
		"d.q.com": true, "d.q.r.com": false, "e.q.com": false,
	} {
		if got := s.Match(flowName(name)); got != want {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
}

func TestSourceSemantics(t *testing.T) {
	src := `{"version": 3, "rules": [
  {"domain_suffix": ".sub.org"},
  {"domain": "tcp.only", "network": "tcp", "port": [443], "port_range": "8000:8100"}
]}`
	inv, err := Parse("i.json", "source", []byte(`{"version": 1, "rules": [{"source_ip_cidr": "192.168.0.0/16", "invert": true, "domain_regex": "^z"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	s, err := Parse("s.json", "source", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	udp := flowName("tcp.only")
	udp.Network = netx.UDP
	p8050 := flowName("tcp.only")
	p8050.Dst.Port = 8050
	p80 := flowName("tcp.only")
	p80.Dst.Port = 80
	lan := flowName("zz.lan")
	lan.Src = netip.MustParseAddrPort("192.168.3.4:999")
	for _, c := range []struct {
		what string
		f    *netx.Flow
		want bool
	}{
		{"a subdomain of .sub.org", flowName("a.sub.org"), true},
		{".sub.org itself", flowName("sub.org"), false},
		{"tcp 443", flowName("tcp.only"), true},
		{"tcp in the range", p8050, true},
		{"tcp 80", p80, false},
		{"udp", udp, false},
	} {
		if got := s.Match(c.f); got != c.want {
			t.Errorf("%s: %v, want %v", c.what, got, c.want)
		}
	}
	// inverted: a flow not matching all of (src in LAN and ^z) matches
	for _, c := range []struct {
		what string
		f    *netx.Flow
		want bool
	}{
		{"inverted, from elsewhere", flowName("zz.lan"), true},
		{"inverted, from the LAN with ^z", lan, false},
	} {
		if got := inv.Match(c.f); got != c.want {
			t.Errorf("%s: %v, want %v", c.what, got, c.want)
		}
	}
	if !s.MatchName("a.sub.org") || s.MatchName("tcp.only") {
		t.Error("MatchName: want the destination-only rules' names only")
	}
}

func singBox(t testing.TB) string {
	t.Helper()
	root, _ := filepath.Abs("..")
	out, err := exec.Command(filepath.Join(root, "scripts", "peers.sh"), "path", "sing-box").Output()
	bin := strings.TrimSpace(string(out))
	if err != nil || bin == "" {
		t.Fatalf("sing-box is not installed (%v): run scripts/peers.sh install", err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("sing-box is not installed at %s: run scripts/peers.sh install", bin)
	}
	return bin
}

// TestSRSFromSingBox compiles the source fixture with the pinned sing-box
// at every rule-set version it writes and reads the .srs back.
func TestSRSFromSingBox(t *testing.T) {
	bin := singBox(t)
	dir := t.TempDir()
	src := `{"version": %V, "rules": [
  {"domain": ["example.org"], "domain_suffix": ["google.com", ".under.net"], "domain_keyword": "adsrv"},
  {"ip_cidr": ["10.0.0.0/8", "fd00::/8", "192.168.1.0/24", "172.16.5.7"]},
  {"domain": "tcp.only", "network": "tcp", "port": 443}
]}`
	for _, v := range []string{"1", "2", "3", "4", "5"} {
		in := filepath.Join(dir, "v"+v+".json")
		outPath := filepath.Join(dir, "v"+v+".srs")
		if err := os.WriteFile(in, []byte(strings.Replace(src, "%V", v, 1)), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(bin, "rule-set", "compile", "--output", outPath, in).CombinedOutput(); err != nil {
			t.Fatalf("version %s: sing-box rule-set compile: %v: %s", v, err, out)
		}
		s, err := Load(outPath, "srs")
		if err != nil {
			t.Fatalf("version %s: %v", v, err)
		}
		checkFixture(t, "srs v"+v, s, true, true, true)
		udp := flowName("tcp.only")
		udp.Network = netx.UDP
		for _, c := range []struct {
			f    *netx.Flow
			want bool
		}{
			{flowName("x.under.net"), true}, {flowName("under.net"), false},
			{flowIP("192.168.1.77"), true}, {flowIP("192.168.2.1"), false},
			{flowIP("172.16.5.7"), true}, {flowIP("172.16.5.8"), false},
			{flowName("tcp.only"), true}, {udp, false},
		} {
			if got := s.Match(c.f); got != c.want {
				t.Errorf("srs v%s: %v: %v, want %v", v, c.f.Dst, got, c.want)
			}
		}
	}
}

func TestBrokenFilesNameTheLine(t *testing.T) {
	for _, c := range []struct {
		format, text, want string
	}{
		{"clash-domain", "a.com\nb.com\nbad name.com\n", "f:3: "},
		{"clash-ipcidr", "10.0.0.0/8\n\n10.0.0.0/33\n", "f:3: "},
		{"clash-classical", "DOMAIN,a.com\nPROCESS-NAME,curl\n", "f:2: "},
		{"clash-classical", "payload:\n  - DOMAIN,a.com\n  oops\n", "f:3: "},
		{"source", "{\"version\": 2,\n \"rules\": [\n  {\"domain\": \"a\"},\n  {\"process_name\": \"x\"}\n]}", "f:4: rules[1]: key \"process_name\""},
		{"source", "{\"version\": 2,\n \"rules\": [\n  {\"type\": \"logical\", \"mode\": \"and\", \"rules\": []}]}", "f:3: rules[0]: a logical rule needs at least one rule"},
		{"source", "{\"version\": 2,\n \"rules\": [\n  {\"domain\": [1]}]}", "f:3: rules[0]: domain"},
		{"source", "{\"version\": 9, \"rules\": []}", "f:1: version 9"},
		{"source", "{\"version\": 2,\n\n \"rules\": [ {\"domain\": \"a\",, }]}", "f:3: "},
		{"srs", "SRX\x01", "f: at byte 0: "},
		{"srs", "SRS\x09", "f: at byte 3: "},
		{"srs", "SRS\x01not zlib", "f: at byte 4: "},
	} {
		_, err := Parse("f", c.format, []byte(c.text))
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s %q: error %v, want one starting %q", c.format, c.text, err, c.want)
		}
	}
}

func TestReloadReusesCompiledForm(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a.txt")
	if err := os.WriteFile(p, []byte("reuse.example\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := Load(p, "clash-domain")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Load(p, "clash-domain")
	if a != b {
		t.Error("an unchanged file was compiled again")
	}
	c, _ := Load(p, "clash-classical")
	if c == a {
		t.Error("another format reused the compiled form")
	}
	if err := os.WriteFile(p, []byte("changed.example\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d, _ := Load(p, "clash-domain")
	if d == a || !d.Match(flowName("changed.example")) {
		t.Error("a changed file was not compiled again")
	}
	for i := range cacheSize + 5 {
		if _, err := Parse("x", "clash-domain", []byte(strings.Repeat("a", i+1)+".example\n")); err != nil {
			t.Fatal(err)
		}
	}
	cache.Lock()
	n := len(cache.m)
	cache.Unlock()
	if n > cacheSize {
		t.Errorf("the cache holds %d sets, over its bound %d", n, cacheSize)
	}
}
