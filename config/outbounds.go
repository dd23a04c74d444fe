package config

import (
	"fmt"

	"switchyard/spec"
)

// outbounds lowers [[outbounds]] and appends the implicit direct and block
// outbounds the file does not declare. Tags are recorded before rules and
// [route] are checked against them.
func (l *lowerer) outbounds(fs []fileOutbound) []spec.Outbound {
	var out []spec.Outbound
	for i := range fs {
		f := &fs[i]
		key := fmt.Sprintf("outbounds[%d]", i)
		var o spec.Outbound

		// The tag is recorded even when the type is refused, so that rules
		// and balancers naming it do not add a second problem.
		first := false // this is the first outbound with its tag
		if tag, ok := l.required(key+".tag", f.Tag); ok {
			if firstKey, dup := l.outboundTags[tag]; dup {
				l.errorf(key+".tag", "duplicate outbound tag %q (first declared on line %d)", tag, l.ix.line(firstKey))
			} else {
				l.outboundTags[tag] = key + ".tag"
				first = true
			}
			o.Tag = tag
		}

		// Keys that belong to a type not accepted here (server, uuid...) are
		// not reported on top of the type.
		typ, ok := l.required(key+".type", f.Type)
		if !ok {
			continue
		}
		canonical, known := outboundTypes[typ]
		if !known {
			l.errorf(key+".type", "unknown outbound type %q", typ)
			l.refused = append(l.refused, key)
			continue
		}
		o.Type = canonical
		if first {
			l.declaredTypes[o.Tag] = canonical
		}

		switch {
		case canonical == "direct":
			o.AddressFamily = l.enum(key+".address_family", f.AddressFamily, defaultAddressFamily, addressFamilies)
		case f.AddressFamily != nil:
			l.errorf(key+".address_family", "a %s outbound has no address family", canonical)
		}
		if f.Drain != "" && l.oneOf(key+".drain", f.Drain, drains) {
			o.Drain = spec.Drain(f.Drain)
		}
		o.UDP = defaultOutboundUDP
		if f.UDP != nil {
			o.UDP = *f.UDP
		}
		out = append(out, o)
	}
	for _, o := range implicitOutbounds {
		if _, declared := l.outboundTags[o.Tag]; !declared {
			out = append(out, o)
		}
	}
	return out
}
