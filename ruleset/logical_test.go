package ruleset

import (
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"switchyard/netx"
)

// The same logical rules, inverted rules and non-ASCII names in sing-box
// source JSON (and so .srs) and as Clash classical lines.
const logicalSource = `{"version": %V, "rules": [
  {"type": "logical", "mode": "and", "rules": [{"domain_suffix": "and.example"}, {"port": 443}]},
  {"type": "logical", "mode": "and", "rules": [
    {"domain_suffix": "orinv.example"},
    {"type": "logical", "mode": "or", "invert": true, "rules": [{"port": 80}, {"network": "udp"}]}
  ]},
  {"type": "logical", "mode": "and", "rules": [
    {"type": "logical", "mode": "or", "rules": [{"domain": "n1.example"}, {"domain": "n2.example"}]},
    {"port_range": "1000:2000", "invert": true}
  ]},
  {"type": "logical", "mode": "and", "rules": [{"domain_suffix": "scope.example"}, {"domain": "no.scope.example", "invert": true}]},
  {"type": "logical", "mode": "or", "rules": [{"domain": "or1.example"}, {"ip_cidr": "203.0.113.0/24"}]},
  {"domain": ["例子.测试"], "domain_suffix": ["bücher.de", ".ñandú.example"]}
]}`

const logicalClassical = `AND,((DOMAIN-SUFFIX,and.example),(DST-PORT,443))
AND,((DOMAIN-SUFFIX,orinv.example),(NOT,((OR,((DST-PORT,80),(NETWORK,UDP))))))
AND,((OR,((DOMAIN,n1.example),(DOMAIN,n2.example))),(NOT,((DST-PORT,1000-2000))))
AND, ((DOMAIN-SUFFIX,scope.example), (NOT,((DOMAIN,no.scope.example))))
OR,((DOMAIN,or1.example),(IP-CIDR,203.0.113.0/24,no-resolve))
DOMAIN,例子.测试
DOMAIN-SUFFIX,bücher.de
DOMAIN-WILDCARD,*.ñandú.example
`

func flowAt(name string, port uint16, n netx.Network) *netx.Flow {
	f := netx.Flow{Network: n, Dst: netx.DomainAddr(name, port)}
	return &f
}

var logicalCases = []struct {
	what string
	f    *netx.Flow
	want bool
}{
	{"and: both", flowAt("a.and.example", 443, netx.TCP), true},
	{"and: one", flowAt("a.and.example", 80, netx.TCP), false},
	{"inverted or: neither", flowAt("x.orinv.example", 443, netx.TCP), true},
	{"inverted or: port 80", flowAt("x.orinv.example", 80, netx.TCP), false},
	{"inverted or: udp", flowAt("x.orinv.example", 443, netx.UDP), false},
	{"nested: first of the or", flowAt("n1.example", 443, netx.TCP), true},
	{"nested: second of the or", flowAt("n2.example", 8443, netx.UDP), true},
	{"nested: in the inverted range", flowAt("n1.example", 1500, netx.TCP), false},
	{"nested: in neither", flowAt("n3.example", 443, netx.TCP), false},
	{"inverted default rule: another name", flowAt("a.scope.example", 443, netx.TCP), true},
	{"inverted default rule: the name", flowAt("no.scope.example", 443, netx.TCP), false},
	{"top-level or: name", flowAt("or1.example", 1, netx.UDP), true},
	{"top-level or: ip", flowIP("203.0.113.9"), true},
	{"top-level or: other ip", flowIP("203.0.114.9"), false},
	{"utf-8 exact", flowAt("例子.测试", 443, netx.TCP), true},
	{"utf-8 exact, final dot", flowAt("例子.测试.", 443, netx.TCP), true},
	{"utf-8 exact, a name under", flowAt("www.例子.测试", 443, netx.TCP), false},
	{"utf-8 suffix", flowAt("www.bücher.de", 443, netx.TCP), true},
	{"utf-8 suffix, upper case", flowAt("BÜCHER.de", 443, netx.TCP), true},
	{"utf-8 suffix, upper case non-ASCII only", flowAt("bÜcher.de", 443, netx.TCP), true},
	{"utf-8 suffix, punycode is another name", flowAt("xn--bcher-kva.de", 443, netx.TCP), false},
	{"utf-8 subdomains", flowAt("a.ñandú.example", 443, netx.TCP), true},
	{"utf-8 subdomains, the name itself", flowAt("ñandú.example", 443, netx.TCP), false},
	{"nothing", flowAt("example.com", 443, netx.TCP), false},
}

func checkLogical(t *testing.T, name string, s *Set) {
	t.Helper()
	for _, c := range logicalCases {
		if got := s.Match(c.f); got != c.want {
			t.Errorf("%s: %s (%v %s): %v, want %v", name, c.what, c.f.Dst, c.f.Network, got, c.want)
		}
	}
	if !s.MatchName("or1.example") || !s.MatchName("www.bücher.de") || s.MatchName("a.and.example") {
		t.Errorf("%s: MatchName: want the names of the destination-only rules (a top-level or's too) only", name)
	}
}

func TestLogicalRulesSource(t *testing.T) {
	s, err := Parse("l.json", "source", []byte(strings.Replace(logicalSource, "%V", "3", 1)))
	if err != nil {
		t.Fatal(err)
	}
	checkLogical(t, "source", s)
}

func TestLogicalRulesClassical(t *testing.T) {
	for _, text := range []string{logicalClassical, "payload:\n  - '" + strings.ReplaceAll(strings.TrimSpace(logicalClassical), "\n", "'\n  - '") + "'\n"} {
		s, err := Parse("l.txt", "clash-classical", []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		checkLogical(t, "clash-classical", s)
	}
}

// TestLogicalRulesSRSFromSingBox compiles the logical rules and the
// non-ASCII names with the pinned sing-box and reads the .srs back: it
// matches as its source does.
func TestLogicalRulesSRSFromSingBox(t *testing.T) {
	bin := singBox(t)
	dir := t.TempDir()
	for _, v := range []string{"1", "3", "5"} {
		text := strings.Replace(logicalSource, "%V", v, 1)
		in := filepath.Join(dir, "l"+v+".json")
		out := filepath.Join(dir, "l"+v+".srs")
		if err := os.WriteFile(in, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if b, err := exec.Command(bin, "rule-set", "compile", "--output", out, in).CombinedOutput(); err != nil {
			t.Fatalf("version %s: sing-box rule-set compile: %v: %s", v, err, b)
		}
		srs, err := Load(out, "srs")
		if err != nil {
			t.Fatalf("version %s: %v", v, err)
		}
		src, err := Parse(in, "source", []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		checkLogical(t, "srs v"+v, srs)
		for _, c := range logicalCases {
			if a, b := srs.Match(c.f), src.Match(c.f); a != b {
				t.Errorf("srs v%s: %s: .srs %v, source %v", v, c.what, a, b)
			}
		}
	}
}

func TestLogicalRulesRefused(t *testing.T) {
	for _, c := range []struct {
		format, text, want string
	}{
		{"source", `{"version": 3, "rules": [{"type": "logical", "rules": [{"domain": "a"}]}]}`, `rules[0]: a logical rule needs a mode`},
		{"source", `{"version": 3, "rules": [{"type": "logical", "mode": "xor", "rules": [{"domain": "a"}]}]}`, `rules[0]: mode "xor" is not`},
		{"source", `{"version": 3, "rules": [{"type": "logical", "mode": "and", "rules": [{"domain": "a"}], "outbound": "x"}]}`, `rules[0]: key "outbound" is not one of a logical rule`},
		{"source", `{"version": 3, "rules": [{"type": "logical", "mode": "and", "rules": [{"domain": "a"}, {"process_name": "curl"}]}]}`,
			`rules[0].rules[1]: key "process_name" is not one switchyard matches in a rule set`},
		{"source", `{"version": 3, "rules": [{"wifi_ssid": "home"}]}`, `does not read the host's network state`},
		{"source", `{"version": 3, "rules": [` + strings.Repeat(`{"type": "logical", "mode": "and", "rules": [`, 101) + `{"domain": "a"}` +
			strings.Repeat(`]}`, 101) + `]}`, `nested more than 100 deep`},
		{"source", `{"version": 3, "rules": [{"invert": true}]}`, `rules[0]: a rule without conditions`},
		{"source", `{"version": 3, "rules": [{"type": "logical", "mode": "or", "rules": [{}]}]}`, `rules[0].rules[0]: a rule without conditions`},
		{"srs", string(srsSeed([]byte{1, 0, 0xFF, 1})), `rule 0: a rule without conditions`},
		{"srs", string(srsSeed([]byte{1, 1, 2, 1, 0, 9, 1, 0, 80, 0xFF, 0, 0})), `rule 0: logical mode 2 is not`},
		{"srs", string(srsSeed([]byte{1, 1, 0, 0, 0})), `rule 0: a logical rule without rules`},
		{"srs", string(srsSeed(deepSRS(101))), `nested more than 100 deep`},
		{"srs", string(srsSeed([]byte{1, 0, 11, 1, 4, 'c', 'u', 'r', 'l', 0xFF, 0})), `process_name is not one switchyard matches in a rule set: switchyard does not look up`},
		{"clash-classical", "DOMAIN,a.com\nNOT,((DOMAIN,a),(DOMAIN,b))\n", `f:2: NOT takes one rule, not 2`},
		{"clash-classical", "AND,((DOMAIN,a),(DOMAIN,b)\n", `f:1: unbalanced parentheses`},
		{"clash-classical", "OR,()\n", `f:1: OR without rules`},
		{"clash-classical", "OR,(DOMAIN,a)\n", `f:1: OR: each rule is in parentheses`},
		{"clash-classical", "AND,((DOMAIN,a),(PROCESS-NAME,curl))\n", `does not look up the process`},
		{"clash-classical", "GEOSITE,cn\n", `f:1: rule type "GEOSITE" is not one switchyard matches in a rule set`},
		{"clash-classical", "AND,((DOMAIN,a)),DIRECT\n", `f:1: unknown option "DIRECT"`},
	} {
		_, err := Parse("f", c.format, []byte(c.text))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %q: error %v, want one with %q", c.format, clip(c.text), err, c.want)
		}
	}
}

// deepSRS is one rule: n logical "and"s nested, around a port 80 rule.
func deepSRS(n int) []byte {
	b := []byte{1}
	for range n {
		b = append(b, 1, 0, 1)
	}
	b = append(b, 0, 9, 1, 0, 80, 0xFF, 0)
	for range n {
		b = append(b, 0)
	}
	return b
}

func TestDeepSRSWithinTheBound(t *testing.T) {
	s, err := Parse("d.srs", "srs", srsSeed(deepSRS(100)))
	if err != nil {
		t.Fatal(err)
	}
	if !s.Match(flowAt("a", 80, netx.TCP)) || s.Match(flowAt("a", 81, netx.TCP)) {
		t.Error("100 nested ands of port 80: want port 80 only")
	}
}

func TestMatchDoesNotAllocate(t *testing.T) {
	s, err := Parse("l.txt", "clash-classical", []byte(logicalClassical))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []*netx.Flow{flowAt("www.bücher.de", 443, netx.TCP), flowAt("n1.example", 443, netx.TCP), flowIP("203.0.113.9")} {
		if n := testing.AllocsPerRun(100, func() { s.Match(f) }); n != 0 {
			t.Errorf("%v: %v allocations a match", f.Dst, n)
		}
	}
}

// broomSRS is one rule of one domain trie: a stem of stem nodes, then
// leaves leaves under its end: leaves names of stem+1 bytes, no dot.
func broomSRS(stem, leaves int) []byte { return broomLabeled(stem, leaves, 0) }

// broomLabeled is broomSRS with every leaf's label leaf (when not 0).
func broomLabeled(stem, leaves int, leaf byte) []byte {
	nodes := 1 + stem + leaves
	var bitmap, leafBits []uint64
	set := func(bs *[]uint64, i int) {
		for len(*bs) <= i>>6 {
			*bs = append(*bs, 0)
		}
		(*bs)[i>>6] |= 1 << (i & 63)
	}
	pos := 0
	for range stem { // the root and the stem but its end: one child each
		pos++ // the child's 0
		set(&bitmap, pos)
		pos++
	}
	pos += leaves // the stem's end: leaves children
	set(&bitmap, pos)
	pos++
	for n := 1 + stem; n < nodes; n++ {
		set(&bitmap, pos)
		set(&leafBits, n)
		pos++
	}
	set(&bitmap, pos) // padding, as a word's tail is
	labels := make([]byte, stem+leaves)
	for i := range labels {
		labels[i] = 'a' + byte(i%26)
		if i >= stem && leaf != 0 {
			labels[i] = leaf
		}
	}
	b := []byte{1, 0, 2, 1}
	words := func(ws []uint64) {
		b = binary.AppendUvarint(b, uint64(len(ws)))
		for _, w := range ws {
			b = binary.BigEndian.AppendUint64(b, w)
		}
	}
	words(leafBits)
	words(bitmap)
	b = binary.AppendUvarint(b, uint64(len(labels)))
	b = append(b, labels...)
	return append(b, 0xFF, 0)
}

// A small file must not compile into far more memory than its size: the
// names a trie expands to and the prefixes IP ranges split into are
// bounded.
func TestSRSExpansionBounded(t *testing.T) {
	if s, err := Parse("b.srs", "srs", srsSeed(broomSRS(40, 1000))); err != nil || !s.MatchName(string(reverseOf(40, 7))) {
		t.Fatalf("a small broom: %v", err)
	}
	if _, err := Parse("b.srs", "srs", srsSeed(broomSRS(4000, 20000))); err == nil || !strings.Contains(err.Error(), "the names add up to more than") {
		t.Errorf("a broom of 80 MB of names: %v", err)
	}
	// "\r" + "cba": the names ending in "cba"
	if s, err := Parse("p.srs", "srs", srsSeed(broomLabeled(3, 1, '\r'))); err != nil ||
		!s.MatchName("xcba") || !s.MatchName("cba") || s.MatchName("cbax") {
		t.Errorf("a plain string suffix: %v", err)
	}
	if _, err := Parse("p.srs", "srs", srsSeed(broomLabeled(3, 1001, '\r'))); err == nil || !strings.Contains(err.Error(), "more than 1000 plain string suffixes") {
		t.Errorf("1001 plain string suffixes: %v", err)
	}
	ranges := []byte{1, 0, 6, 1}
	n := srsMaxPrefixes/62 + 1
	ranges = binary.BigEndian.AppendUint64(ranges, uint64(n))
	for range n {
		ranges = append(ranges, 4, 0, 0, 0, 1, 4, 255, 255, 255, 254)
	}
	ranges = append(ranges, 0xFF, 0)
	if _, err := Parse("r.srs", "srs", srsSeed(ranges)); err == nil || !strings.Contains(err.Error(), "split into more than") {
		t.Errorf("ranges of 8M prefixes: %v", err)
	}
}

// reverseOf is the name of the broom's leaf i (of a stem of stem nodes).
func reverseOf(stem, i int) []byte {
	path := make([]byte, 0, stem+1)
	for j := range stem {
		path = append(path, 'a'+byte(j%26))
	}
	path = append(path, 'a'+byte((stem+i)%26))
	for l, r := 0, len(path)-1; l < r; l, r = l+1, r-1 {
		path[l], path[r] = path[r], path[l]
	}
	return path
}
