package serve

import (
	"context"
	"net"
	"net/netip"
	"testing"

	"github.com/miekg/dns"
)

// exchangeFunc is an Exchanger made of a function.
type exchangeFunc func(ctx context.Context, q *dns.Msg) (*dns.Msg, error)

func (f exchangeFunc) Exchange(ctx context.Context, q *dns.Msg) (*dns.Msg, error) { return f(ctx, q) }

// fixed answers every A question with n addresses from 10.0.0.0/8 (one
// when n is 0), under another ID and with the name lowercased, as a
// cache might.
func fixed(n int) exchangeFunc {
	return func(_ context.Context, q *dns.Msg) (*dns.Msg, error) {
		return answerA(q, n), nil
	}
}

func answerA(q *dns.Msg, n int) *dns.Msg {
	r := new(dns.Msg)
	r.SetReply(q)
	r.Id = q.Id + 1
	name := dns.CanonicalName(q.Question[0].Name)
	r.Question[0].Name = name
	if q.Question[0].Qtype != dns.TypeA {
		return r
	}
	n = max(n, 1)
	for i := range n {
		ip := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		r.Answer = append(r.Answer, &dns.A{
			Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
			A:   net.IP(ip.AsSlice()),
		})
	}
	return r
}

// mkQuery packs a query for name and qtype with id; edns > 0 adds an OPT
// record of that UDP size.
func mkQuery(t testing.TB, id uint16, name string, qtype uint16, edns uint16) []byte {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.Id = id
	if edns > 0 {
		m.SetEdns0(edns, false)
	}
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func unpack(t testing.TB, b []byte) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	if err := m.Unpack(b); err != nil {
		t.Fatalf("reply does not parse: %v (% x)", err, b)
	}
	return m
}
