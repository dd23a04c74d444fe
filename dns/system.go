package dns

import (
	"context"
	"errors"
	"net"
	"strings"

	mdns "github.com/miekg/dns"

	"switchyard/netx"
)

// systemExchange answers an A or AAAA question with the operating system's
// resolver (net.DefaultResolver), which reports no TTL: the records carry
// netx.DefaultTTL. A name the system does not know is NXDOMAIN; a name
// known only in the other family is NODATA, with no SOA (so not cached).
// Other types get NOTIMP: the system resolver answers addresses only.
func systemExchange(ctx context.Context, m *mdns.Msg) (*mdns.Msg, error) {
	q := m.Question[0]
	resp := new(mdns.Msg)
	resp.SetReply(m)
	resp.RecursionAvailable = true
	if q.Qclass != mdns.ClassINET || (q.Qtype != mdns.TypeA && q.Qtype != mdns.TypeAAAA) {
		resp.Rcode = mdns.RcodeNotImplemented
		return resp, nil
	}
	name := strings.TrimSuffix(q.Name, ".")
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", name)
	if err != nil {
		var de *net.DNSError
		if errors.As(err, &de) && de.IsNotFound {
			resp.Rcode = mdns.RcodeNameError
			return resp, nil
		}
		return nil, err
	}
	ttl := uint32(netx.DefaultTTL.Seconds())
	for _, ip := range ips {
		ip = ip.Unmap()
		hdr := mdns.RR_Header{Name: q.Name, Class: mdns.ClassINET, Ttl: ttl}
		switch {
		case ip.Is4() && q.Qtype == mdns.TypeA:
			hdr.Rrtype = mdns.TypeA
			resp.Answer = append(resp.Answer, &mdns.A{Hdr: hdr, A: ip.AsSlice()})
		case ip.Is6() && q.Qtype == mdns.TypeAAAA:
			hdr.Rrtype = mdns.TypeAAAA
			resp.Answer = append(resp.Answer, &mdns.AAAA{Hdr: hdr, AAAA: ip.AsSlice()})
		}
	}
	return resp, nil
}
