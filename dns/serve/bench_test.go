package serve

import (
	"context"
	"testing"

	"github.com/miekg/dns"

	"switchyard/netx"
)

// BenchmarkLinkRoundTrip is one UDP query through a packet link, answered
// by an Exchanger that returns one shared message, as a cache hit does.
func BenchmarkLinkRoundTrip(b *testing.B) {
	proto := new(dns.Msg)
	proto.SetQuestion("www.example.com.", dns.TypeA)
	shared := answerA(proto, 2)
	s := New(exchangeFunc(func(context.Context, *dns.Msg) (*dns.Msg, error) { return shared, nil }), Options{})
	l := s.PacketLink()
	defer l.Close()
	q := mkQuery(b, 1, "www.example.com.", dns.TypeA, 1232)
	to := netx.DomainAddr("dns.test", 53)
	buf := make([]byte, 2048)
	b.ReportAllocs()
	for b.Loop() {
		if err := l.WritePacket(q, to); err != nil {
			b.Fatal(err)
		}
		if _, _, err := l.ReadPacket(buf); err != nil {
			b.Fatal(err)
		}
	}
}
