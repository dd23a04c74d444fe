package main

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"strconv"
)

// The DNS and SOCKS5 bytes the stub and the load generator exchange, built
// and read by hand: both sides of the benchmark should cost as little CPU
// as they can, since they share the machine with the router measured.

const (
	typeA   = 1
	typeTXT = 16
	classIN = 1
	classCH = 3

	flagQR = 0x8000
	flagAA = 0x0400
	flagRD = 0x0100
	flagRA = 0x0080

	answerTTL = 3600 // seconds, every A record of the stub

	headerLen = 12
	socksV4   = 10 // a SOCKS5 UDP header with an IPv4 address
)

// countName is the stub's own name, asked in class CH for type TXT: its
// answer is the number of queries the stub has received.
var countName = wireName("queries.stub")

// wireName is name ("a.b.c", no trailing dot) in DNS wire format.
func wireName(name string) []byte {
	return appendName(nil, name)
}

// appendName appends name ("a.b.c", no trailing dot) in wire format.
func appendName(b []byte, name string) []byte {
	start := 0
	for i := 0; i <= len(name); i++ {
		if i == len(name) || name[i] == '.' {
			b = append(b, byte(i-start))
			b = append(b, name[start:i]...)
			start = i + 1
		}
	}
	return append(b, 0)
}

// addressOf is the address the stub answers for the wire-format name q:
// 192.0.2.1 to 192.0.2.254, from an FNV-1a hash of the name with ASCII
// letters folded to lower case, so that the load generator can check an
// answer without asking the stub.
func addressOf(q []byte) [4]byte {
	h := uint32(2166136261)
	for _, c := range q {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		h ^= uint32(c)
		h *= 16777619
	}
	return [4]byte{192, 0, 2, byte(h%254 + 1)}
}

var errMalformed = errors.New("malformed message")

// nameEnd returns the offset just past the uncompressed name at b[off:].
func nameEnd(b []byte, off int) (int, error) {
	for off < len(b) {
		n := int(b[off])
		switch {
		case n == 0:
			return off + 1, nil
		case n&0xc0 != 0:
			return 0, errMalformed // queries carry no compression
		}
		off += 1 + n
	}
	return 0, errMalformed
}

// skipName returns the offset just past the possibly compressed name at
// b[off:].
func skipName(b []byte, off int) (int, error) {
	for off < len(b) {
		n := int(b[off])
		switch {
		case n == 0:
			return off + 1, nil
		case n&0xc0 == 0xc0:
			if off+2 > len(b) {
				return 0, errMalformed
			}
			return off + 2, nil
		case n&0xc0 != 0:
			return 0, errMalformed
		}
		off += 1 + n
	}
	return 0, errMalformed
}

// stubAnswer appends to out the stub's answer to the query q, or returns
// out unchanged when q is not a query to answer (a response, another
// opcode, not one question, bytes that do not parse). The answer carries
// the query's ID, RD bit and question; an A question in class IN gets one
// A record (addressOf the name, TTL answerTTL), the TXT question of
// countName in class CH gets count, anything else no record. EDNS is not
// spoken: the answer has no OPT record.
func stubAnswer(out, q []byte, count func() uint64) []byte {
	if len(q) < headerLen {
		return out
	}
	flags := binary.BigEndian.Uint16(q[2:])
	if flags&flagQR != 0 || flags&0x7800 != 0 || binary.BigEndian.Uint16(q[4:]) != 1 {
		return out
	}
	end, err := nameEnd(q, headerLen)
	if err != nil || end+4 > len(q) {
		return out
	}
	name := q[headerLen:end]
	qtype := binary.BigEndian.Uint16(q[end:])
	qclass := binary.BigEndian.Uint16(q[end+2:])
	start := len(out)
	out = append(out, q[0], q[1])
	out = binary.BigEndian.AppendUint16(out, flagQR|flagAA|flagRA|flags&flagRD)
	out = append(out, 0, 1, 0, 0, 0, 0, 0, 0) // QD 1, AN filled in below
	out = append(out, q[headerLen:end+4]...)
	switch {
	case qtype == typeA && qclass == classIN:
		out = append(out, 0xc0, headerLen) // the question's name
		out = binary.BigEndian.AppendUint16(out, typeA)
		out = binary.BigEndian.AppendUint16(out, classIN)
		out = binary.BigEndian.AppendUint32(out, answerTTL)
		out = binary.BigEndian.AppendUint16(out, 4)
		ip := addressOf(name)
		out = append(out, ip[:]...)
		out[start+7] = 1
	case qtype == typeTXT && qclass == classCH && equalFold(name, countName):
		s := strconv.FormatUint(count(), 10)
		out = append(out, 0xc0, headerLen)
		out = binary.BigEndian.AppendUint16(out, typeTXT)
		out = binary.BigEndian.AppendUint16(out, classCH)
		out = binary.BigEndian.AppendUint32(out, 0)
		out = binary.BigEndian.AppendUint16(out, uint16(1+len(s)))
		out = append(out, byte(len(s)))
		out = append(out, s...)
		out[start+7] = 1
	}
	return out
}

// equalFold compares two wire-format names, ASCII letters folded.
func equalFold(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// appendQuery appends a query for the A record of the wire-format name,
// with RD set and no EDNS, as a stub resolver sends it.
func appendQuery(b []byte, id uint16, name []byte) []byte {
	b = binary.BigEndian.AppendUint16(b, id)
	b = binary.BigEndian.AppendUint16(b, flagRD)
	b = append(b, 0, 1, 0, 0, 0, 0, 0, 0)
	b = append(b, name...)
	b = binary.BigEndian.AppendUint16(b, typeA)
	return binary.BigEndian.AppendUint16(b, classIN)
}

// appendSocksUDP appends the SOCKS5 UDP request header for to (IPv4).
func appendSocksUDP(b []byte, to netip.AddrPort) []byte {
	ip := to.Addr().As4()
	b = append(b, 0, 0, 0, 1)
	b = append(b, ip[:]...)
	return binary.BigEndian.AppendUint16(b, to.Port())
}

// parseSocksUDP splits a SOCKS5 UDP datagram into the address it names
// and its payload. Only IPv4 addresses are expected: both routers
// attribute an answer to the address its query was sent to.
func parseSocksUDP(b []byte) (netip.AddrPort, []byte, error) {
	if len(b) < socksV4 || b[0] != 0 || b[1] != 0 || b[2] != 0 || b[3] != 1 {
		return netip.AddrPort{}, nil, errMalformed
	}
	from := netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), binary.BigEndian.Uint16(b[8:10]))
	return from, b[socksV4:], nil
}

// replyError says what is wrong with a reply to a query.
type replyError string

func (e replyError) Error() string { return string(e) }

// checkReply checks that r answers the query for the wire-format name
// with NOERROR, its question as asked, and an A record of want.
func checkReply(r, name []byte, want [4]byte) error {
	if len(r) < headerLen {
		return replyError("short")
	}
	flags := binary.BigEndian.Uint16(r[2:])
	switch {
	case flags&flagQR == 0:
		return replyError("not a response")
	case flags&0xf != 0:
		return replyError("rcode " + strconv.Itoa(int(flags&0xf)))
	case flags&0x0200 != 0:
		return replyError("truncated")
	case binary.BigEndian.Uint16(r[4:]) != 1:
		return replyError("not one question")
	}
	an := int(binary.BigEndian.Uint16(r[6:]))
	qend := headerLen + len(name) + 4
	if qend > len(r) || !equalFold(r[headerLen:headerLen+len(name)], name) ||
		binary.BigEndian.Uint16(r[qend-4:]) != typeA || binary.BigEndian.Uint16(r[qend-2:]) != classIN {
		return replyError("another question")
	}
	off := qend
	for range an {
		end, err := skipName(r, off)
		if err != nil || end+10 > len(r) {
			return replyError("malformed")
		}
		typ := binary.BigEndian.Uint16(r[end:])
		n := int(binary.BigEndian.Uint16(r[end+8:]))
		off = end + 10 + n
		if off > len(r) {
			return replyError("malformed")
		}
		if typ == typeA && n == 4 {
			if [4]byte(r[end+10:off]) == want {
				return nil
			}
			return replyError("wrong address")
		}
	}
	return replyError("no A record")
}
