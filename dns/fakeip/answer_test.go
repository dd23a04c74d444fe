package fakeip

import (
	"net/netip"
	"testing"

	"github.com/miekg/dns"
)

func ask(name string, qtype uint16) *dns.Msg {
	q := new(dns.Msg)
	q.SetQuestion(name, qtype)
	return q
}

func TestAnswerer(t *testing.T) {
	direct := map[string]bool{"direct.test": true}
	var asked []string
	proxied := func(name string) bool {
		asked = append(asked, name)
		return !direct[name]
	}
	both := mustNew(t, Config{IPv4: v4Range, IPv6: v6Range, Filter: []string{"lan"}})
	v4only := mustNew(t, Config{IPv4: v4Range})
	v6only := mustNew(t, Config{IPv6: v6Range})
	for _, tc := range []struct {
		name    string
		tb      *Table
		q       *dns.Msg
		handled bool
		want    string // the address answered; "" for none
	}{
		{"A", both, ask("Www.Example.com.", dns.TypeA), true, "198.18.0.1"},
		{"AAAA", both, ask("www.example.com.", dns.TypeAAAA), true, "fc00::1"},
		{"AAAA of another name", both, ask("other.example.", dns.TypeAAAA), true, "fc00::2"},
		{"AAAA without an IPv6 range", v4only, ask("a.test.", dns.TypeAAAA), true, ""},
		{"A without an IPv4 range", v6only, ask("a.test.", dns.TypeA), true, ""},
		{"A with only IPv4", v4only, ask("a.test.", dns.TypeA), true, "198.18.0.1"},
		{"MX", both, ask("www.example.com.", dns.TypeMX), false, ""},
		{"HTTPS", both, ask("www.example.com.", dns.TypeHTTPS), false, ""},
		{"class CH", both, func() *dns.Msg { q := ask("a.test.", dns.TypeA); q.Question[0].Qclass = dns.ClassCHAOS; return q }(), false, ""},
		{"filtered", both, ask("printer.lan.", dns.TypeA), false, ""},
		{"not proxied", both, ask("direct.test.", dns.TypeA), false, ""},
		{"root", both, ask(".", dns.TypeA), false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, ok := Answerer(tc.tb, proxied).Answer(tc.q)
			if ok != tc.handled {
				t.Fatalf("handled %v, want %v", ok, tc.handled)
			}
			if !ok {
				return
			}
			if r.Id != tc.q.Id || !r.Response || r.Rcode != dns.RcodeSuccess || len(r.Question) != 1 {
				t.Fatalf("reply %v", r)
			}
			if tc.want == "" {
				if len(r.Answer) != 0 {
					t.Fatalf("answers %v, want none", r.Answer)
				}
				return
			}
			if len(r.Answer) != 1 {
				t.Fatalf("answers %v", r.Answer)
			}
			hdr := r.Answer[0].Header()
			if hdr.Ttl != TTL || hdr.Name != tc.q.Question[0].Name || hdr.Rrtype != tc.q.Question[0].Qtype {
				t.Fatalf("record %v", r.Answer[0])
			}
			var got netip.Addr
			switch rr := r.Answer[0].(type) {
			case *dns.A:
				got, _ = netip.AddrFromSlice(rr.A)
			case *dns.AAAA:
				got, _ = netip.AddrFromSlice(rr.AAAA)
			}
			if got.String() != tc.want {
				t.Fatalf("answered %v, want %s", got, tc.want)
			}
			if name, ok := tc.tb.Name(got); !ok || name != normalize(tc.q.Question[0].Name) {
				t.Fatalf("Name(%v) = %q", got, name)
			}
		})
	}
	// Filtered names are not even routed; proxied sees normalized names.
	for _, n := range asked {
		if n == "printer.lan" {
			t.Fatal("proxied was asked about a filtered name")
		}
		if n != normalize(n) {
			t.Fatalf("proxied was asked %q", n)
		}
	}
	// A nil proxied gives every name a fake address.
	if _, ok := Answerer(both, nil).Answer(ask("direct.test.", dns.TypeA)); !ok {
		t.Fatal("nil proxied left a name to the resolvers")
	}
}
