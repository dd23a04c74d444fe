package probe

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// DNSName is the name the UDP probe asks for (type A, class IN): the host
// of DefaultURL, which any resolver can answer.
const DNSName = "www.gstatic.com"

// dnsQuery is the probe's query with ID 0: a 12-byte header with RD set
// and one question.
var dnsQuery = func() []byte {
	b := []byte{0, 0, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0}
	b = appendName(b, DNSName)
	return append(b, 0, 1, 0, 1) // QTYPE A, QCLASS IN
}()

func appendName(b []byte, name string) []byte {
	for len(name) > 0 {
		label := name
		if i := indexDot(name); i >= 0 {
			label, name = name[:i], name[i+1:]
		} else {
			name = ""
		}
		b = append(b, byte(len(label)))
		b = append(b, label...)
	}
	return append(b, 0)
}

func indexDot(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			return i
		}
	}
	return -1
}

// appendQuery appends the probe's query with id.
func appendQuery(b []byte, id uint16) []byte {
	b = append(b, dnsQuery...)
	binary.BigEndian.PutUint16(b[len(b)-len(dnsQuery):], id)
	return b
}

var errNotReply = errors.New("not a reply to the probe's query")

// checkReply reports whether p is a DNS response to the probe's query with
// id: the ID matches, QR is set, the opcode is QUERY, and the first
// question, when the reply carries one, is the probe's (the name compared
// without regard to case, a compression pointer allowed). Any RCODE counts,
// and so do truncated replies: the resolver answered. Records after the
// question are not read.
func checkReply(p []byte, id uint16) error {
	if len(p) < 12 {
		return fmt.Errorf("%w: %d bytes, shorter than a DNS header", errNotReply, len(p))
	}
	if binary.BigEndian.Uint16(p) != id {
		return fmt.Errorf("%w: ID %d", errNotReply, binary.BigEndian.Uint16(p))
	}
	if p[2]&0x80 == 0 {
		return fmt.Errorf("%w: a query, not a response", errNotReply)
	}
	if op := p[2] >> 3 & 0x0f; op != 0 {
		return fmt.Errorf("%w: opcode %d", errNotReply, op)
	}
	if binary.BigEndian.Uint16(p[4:]) == 0 {
		return nil // an error response may leave the question out
	}
	end, ok := matchName(p, 12, DNSName)
	if !ok || end+4 > len(p) {
		return fmt.Errorf("%w: question not the probe's", errNotReply)
	}
	if binary.BigEndian.Uint16(p[end:]) != 1 || binary.BigEndian.Uint16(p[end+2:]) != 1 {
		return fmt.Errorf("%w: question not the probe's type or class", errNotReply)
	}
	return nil
}

// matchName reads the name at off in msg and reports whether it is want,
// and where the name ends in place (after its terminator or first pointer).
// Pointers are followed at most 16 times.
func matchName(msg []byte, off int, want string) (end int, ok bool) {
	end = -1
	w := 0 // how much of want is matched
	for hops := 0; ; {
		if off >= len(msg) {
			return 0, false
		}
		n := int(msg[off])
		switch {
		case n == 0:
			if end < 0 {
				end = off + 1
			}
			return end, w == len(want)
		case n&0xc0 == 0xc0:
			if off+1 >= len(msg) || hops == 16 {
				return 0, false
			}
			if end < 0 {
				end = off + 2
			}
			hops++
			off = int(binary.BigEndian.Uint16(msg[off:]) & 0x3fff)
			continue
		case n&0xc0 != 0:
			return 0, false // reserved label types
		}
		label := msg[off+1 : min(off+1+n, len(msg))]
		if len(label) < n {
			return 0, false
		}
		if w > 0 {
			if w >= len(want) || want[w] != '.' {
				return 0, false
			}
			w++
		}
		if w+n > len(want) || !labelEqual(label, want[w:w+n]) {
			return 0, false
		}
		w += n
		off += 1 + n
	}
}

func labelEqual(a []byte, b string) bool {
	for i := range a {
		x, y := a[i], b[i]
		if x == '.' {
			return false // a dot inside a label is not a separator
		}
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
