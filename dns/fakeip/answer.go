package fakeip

import (
	"github.com/miekg/dns"

	"switchyard/dns/serve"
)

// TTL is the time to live, in seconds, of a fake answer. One second, as
// mihomo uses: a client asks again soon, so a mapping in use stays recently
// used and is not recycled, and once a mapping has been recycled an old
// answer for its addresses does not live on in caches that honour the
// TTL. A flow carries the name, not the address, so nothing is lost by
// asking often; the answer costs no real query.
const TTL = 1

// Answerer returns the service's FakeIP hook over t. It answers an A or
// AAAA question of class IN whose name is not Filtered and for which
// proxied reports true (the flow to that name would go through a proxy;
// nil means every name) with the name's fake address, TTL seconds, and no
// real query: the name's IPv4 address for A, IPv6 for AAAA; when t has no
// range of the family asked for, an empty NOERROR answer. Every other
// question is left to the service's resolvers. proxied is called with the
// name in lowercase without its trailing dot, on the query's goroutine.
func Answerer(t *Table, proxied func(name string) bool) serve.FakeIP {
	return &answerer{t: t, proxied: proxied}
}

type answerer struct {
	t       *Table
	proxied func(string) bool
}

func (a *answerer) Answer(q *dns.Msg) (*dns.Msg, bool) {
	if len(q.Question) != 1 {
		return nil, false
	}
	qq := q.Question[0]
	if qq.Qclass != dns.ClassINET || (qq.Qtype != dns.TypeA && qq.Qtype != dns.TypeAAAA) {
		return nil, false
	}
	name := normalize(qq.Name)
	if name == "" || len(name) > maxName || a.t.filter.match(name) {
		return nil, false
	}
	if a.proxied != nil && !a.proxied(name) {
		return nil, false
	}
	r := new(dns.Msg)
	r.SetReply(q)
	r.RecursionAvailable = true
	hdr := dns.RR_Header{Name: qq.Name, Rrtype: qq.Qtype, Class: dns.ClassINET, Ttl: TTL}
	switch {
	case qq.Qtype == dns.TypeA && a.t.v4.used:
		v4, _ := a.t.Lookup(name)
		r.Answer = []dns.RR{&dns.A{Hdr: hdr, A: v4.AsSlice()}}
	case qq.Qtype == dns.TypeAAAA && a.t.v6.used:
		_, v6 := a.t.Lookup(name)
		r.Answer = []dns.RR{&dns.AAAA{Hdr: hdr, AAAA: v6.AsSlice()}}
	}
	return r, true
}
