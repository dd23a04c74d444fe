package sniff

import "encoding/binary"

// DNS message constants.
const (
	dnsHeaderLen   = 12
	dnsMaxName     = 255 // the longest name on the wire, length bytes included
	dnsMaxLabel    = 63
	dnsTypeOPT     = 41
	dnsFlagQR      = 0x8000
	dnsFlagZ       = 0x0040
	dnsOpcodeMask  = 0x7800
	dnsRcodeMask   = 0x000f
	dnsClassIN     = 1
	dnsClassCH     = 3
	dnsClassHS     = 4
	dnsClassANY    = 255
	dnsClassQUMask = 0x7fff // mDNS sets the top bit of a question's class
)

// DNSQuery recognises a DNS query message: a standard query (QR 0, opcode
// QUERY, RCODE 0, Z 0) with exactly one question of a known class, no answer
// and no authority records, at most one additional record which must be an
// OPT pseudo-record, and nothing after the message. ok is true for such a
// message; name is its question name, lowercased without the trailing dot,
// or "" for the root or a name that is not a host name. A name is read from
// b alone (a query holds no compression pointer) and is at most 255 bytes on
// the wire.
func DNSQuery(b []byte) (name string, ok bool) {
	if len(b) < dnsHeaderLen+1+4 {
		return "", false
	}
	flags := binary.BigEndian.Uint16(b[2:])
	if flags&(dnsFlagQR|dnsFlagZ|dnsOpcodeMask|dnsRcodeMask) != 0 {
		return "", false
	}
	qd, an := binary.BigEndian.Uint16(b[4:]), binary.BigEndian.Uint16(b[6:])
	ns, ar := binary.BigEndian.Uint16(b[8:]), binary.BigEndian.Uint16(b[10:])
	if qd != 1 || an != 0 || ns != 0 || ar > 1 {
		return "", false
	}
	var text [dnsMaxName]byte
	n, host := 0, true
	i := dnsHeaderLen
	for {
		if i >= len(b) || i-dnsHeaderLen >= dnsMaxName {
			return "", false
		}
		l := int(b[i])
		i++
		if l == 0 {
			break
		}
		if l > dnsMaxLabel || i+l > len(b) {
			return "", false // a pointer, a reserved label type, or cut
		}
		if n > 0 {
			text[n] = '.'
			n++
		}
		for _, c := range b[i : i+l] {
			if c == '.' {
				host = false // a dot inside a label names no host
			}
		}
		n += copy(text[n:], b[i:i+l])
		i += l
	}
	if i-dnsHeaderLen > dnsMaxName || i+4 > len(b) {
		return "", false
	}
	qtype, qclass := binary.BigEndian.Uint16(b[i:]), binary.BigEndian.Uint16(b[i+2:])
	i += 4
	if qtype == 0 {
		return "", false
	}
	switch qclass & dnsClassQUMask {
	case dnsClassIN, dnsClassCH, dnsClassHS, dnsClassANY:
	default:
		return "", false
	}
	if ar == 1 {
		// OPT: the root name, TYPE 41, CLASS, TTL, RDLENGTH and RDATA.
		if i+11 > len(b) || b[i] != 0 || binary.BigEndian.Uint16(b[i+1:]) != dnsTypeOPT {
			return "", false
		}
		rdlen := int(binary.BigEndian.Uint16(b[i+9:]))
		i += 11 + rdlen
	}
	if i != len(b) {
		return "", false
	}
	if n > 0 && host {
		name, _ = hostName(text[:n])
	}
	return name, true
}
