package sniff

import (
	"strings"
	"testing"

	"switchyard/route/sniff/snifftest"
)

func TestDNSQuery(t *testing.T) {
	with := func(b []byte, f func([]byte) []byte) []byte { return f(append([]byte{}, b...)) }
	q := snifftest.DNSQuery("www.example.com", 1, 1, false)
	withOPT := snifftest.DNSQuery("WWW.Example.COM.", 28, 1, true)
	tests := []struct {
		name string
		in   []byte
		want string
		ok   bool
	}{
		{"A query", q, "www.example.com", true},
		{"AAAA with OPT, mixed case", withOPT, "www.example.com", true},
		{"root NS query", snifftest.DNSQuery(".", 2, 1, false), "", true},
		{"mDNS QU class", snifftest.DNSQuery("printer.local", 12, 0x8001, false), "printer.local", true},
		{"all-digit name is no host", snifftest.DNSQuery("1.2.3.4", 1, 1, false), "", true},
		{"service name", snifftest.DNSQuery("_dns.resolver.arpa", 64, 1, false), "_dns.resolver.arpa", true},
		{"dot inside a label", with(q, func(b []byte) []byte { b[13] = '.'; return b }), "", true},
		{"response", with(q, func(b []byte) []byte { b[2] |= 0x80; return b }), "", false},
		{"opcode notify", with(q, func(b []byte) []byte { b[2] |= 4 << 3; return b }), "", false},
		{"rcode set", with(q, func(b []byte) []byte { b[3] |= 3; return b }), "", false},
		{"z set", with(q, func(b []byte) []byte { b[3] |= 0x40; return b }), "", false},
		{"two questions", with(q, func(b []byte) []byte { b[5] = 2; return b }), "", false},
		{"no question", with(q, func(b []byte) []byte { b[5] = 0; return b }), "", false},
		{"an answer", with(q, func(b []byte) []byte { b[7] = 1; return b }), "", false},
		{"an authority", with(q, func(b []byte) []byte { b[9] = 1; return b }), "", false},
		{"additional count without record", with(q, func(b []byte) []byte { b[11] = 1; return b }), "", false},
		{"two additionals", with(withOPT, func(b []byte) []byte { b[11] = 2; return b }), "", false},
		{"additional not OPT", with(withOPT, func(b []byte) []byte { b[len(b)-18] = 1; return b }), "", false},
		{"OPT rdata cut", withOPT[:len(withOPT)-1], "", false},
		{"trailing byte", append(append([]byte{}, q...), 0), "", false},
		{"cut in the question", q[:len(q)-1], "", false},
		{"cut in the name", q[:20], "", false},
		{"compression pointer", append(append([]byte{}, q[:12]...), 0xc0, 0x0c, 0, 1, 0, 1), "", false},
		{"class 0", snifftest.DNSQuery("a.example", 1, 0, false), "", false},
		{"type 0", snifftest.DNSQuery("a.example", 0, 1, false), "", false},
		{"name too long", snifftest.DNSQuery(strings.Repeat(strings.Repeat("a", 63)+".", 4)+"com", 1, 1, false), "", false},
		{"header only", q[:12], "", false},
		{"empty", nil, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := DNSQuery(tt.in)
			if got != tt.want || ok != tt.ok {
				t.Fatalf("DNSQuery = %q, %v; want %q, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
	// The longest name that fits: 255 bytes on the wire.
	longest := strings.Repeat(strings.Repeat("a", 62)+".", 3) + strings.Repeat("b", 61)
	if got, ok := DNSQuery(snifftest.DNSQuery(longest, 1, 1, false)); !ok || got != longest {
		t.Fatalf("the longest name: %q, %v", got, ok)
	}
}

func TestDNSQueryAllocations(t *testing.T) {
	q := snifftest.DNSQuery("www.example.com", 1, 1, true)
	// One allocation: the returned name.
	if n := testing.AllocsPerRun(50, func() { DNSQuery(q) }); n > 1 {
		t.Fatalf("DNSQuery allocates %v times", n)
	}
}
