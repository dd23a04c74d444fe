package fanout

import (
	"bytes"
	"sync"

	"switchyard/netx"
	"switchyard/route/sniff"
)

// Bounds of packet sniffing, per association.
const (
	// maxQUICConns bounds the QUIC connections an association remembers,
	// one per destination: past it the least recently used is forgotten
	// (its later packets then route unsniffed).
	maxQUICConns = 256
	// maxPending bounds the connections whose Initials are held at once,
	// waiting for the rest of their ClientHello; past it the oldest is
	// dropped, as a lossy link drops, and its client retransmits.
	maxPending = 8
	// maxHeldPerConn bounds the Initial datagrams held for one connection:
	// past it the connection routes as QUIC without a name.
	maxHeldPerConn = 8
	// maxHeldBytes bounds the bytes of all held datagrams of an association.
	maxHeldBytes = 64 << 10
)

// sniffed is what sniffing found in a packet: its flow's Protocol and
// Sniffed.
type sniffed struct{ protocol, domain string }

// quicConn is what an association remembers of the last QUIC connection to
// one destination.
type quicConn struct {
	dcid   []byte   // the Destination Connection ID of its first Initial
	result sniffed  // how its packets route, once known
	held   [][]byte // its Initials not sent yet; non-nil while pending
	used   uint64   // the sniffer's clock when last used, for eviction
}

func (c *quicConn) pending() bool { return c.held != nil }

// sniffer sniffs the packets of an association whose inbound sniffs: a QUIC
// Initial for its ClientHello's server name, a DNS query for its question
// name. The result of a QUIC connection's Initial is remembered for its
// destination, so the connection's later packets, which name nothing, take
// the same route. When a ClientHello spans several Initial datagrams, the
// first are held until the rest arrive, then all go on the route the whole
// ClientHello gives.
type sniffer struct {
	mu        sync.Mutex // guards the fields below; never held across I/O
	conns     map[netx.Addr]*quicConn
	clock     uint64
	pending   int // conns with held datagrams
	heldBytes int // bytes of all held datagrams
}

func newSniffer() *sniffer {
	return &sniffer{conns: make(map[netx.Addr]*quicConn)}
}

// sniffVerdict is how a sniffed packet is sent: after release (held packets of
// its connection, routed as releaseAs), routed as s, or not at all when
// held.
type sniffVerdict struct {
	s         sniffed
	hold      bool
	release   [][]byte
	releaseAs sniffed
}

// writeSniffed sniffs p, then sends it (and any packets it releases) as
// WritePacket does.
func (l *Link) writeSniffed(p []byte, to netx.Addr) error {
	v := l.sniffer.packet(p, to)
	for _, h := range v.release {
		if err := l.write(h, to, v.releaseAs); err != nil {
			return err
		}
	}
	if v.hold {
		return l.dropped()
	}
	return l.write(p, to, v.s)
}

// packet decides how p toward to routes. Only a datagram that starts like a
// QUIC Initial is decrypted; the cheap tests come first.
func (sn *sniffer) packet(p []byte, to netx.Addr) sniffVerdict {
	sn.mu.Lock()
	defer sn.mu.Unlock()
	if dcid, ok := sniff.QUICInitial(p); ok {
		return sn.initial(p, to, dcid)
	}
	if name, ok := sniff.DNSQuery(p); ok {
		return sniffVerdict{s: sniffed{sniff.ProtocolDNS, name}}
	}
	// A packet with QUIC's fixed bit: perhaps the connection's later packets.
	if len(p) > 0 && p[0]&0x40 != 0 {
		if c := sn.conns[to]; c != nil && !c.pending() {
			sn.clock++
			c.used = sn.clock
			return sniffVerdict{s: c.result}
		}
	}
	return sniffVerdict{}
}

// initial handles a QUIC Initial packet with Destination Connection ID dcid.
func (sn *sniffer) initial(p []byte, to netx.Addr, dcid []byte) sniffVerdict {
	sn.clock++
	c := sn.conns[to]
	if c != nil && bytes.Equal(c.dcid, dcid) {
		c.used = sn.clock
		if !c.pending() {
			return sniffVerdict{s: c.result} // a later Initial of a known connection
		}
		return sn.more(c, p)
	}
	name, quic, more := sniff.QUIC(p)
	if !quic {
		// Not decryptable with its own connection ID: a later Initial of
		// the known connection, sent to the ID the server chose.
		if c != nil && !c.pending() {
			return sniffVerdict{s: c.result}
		}
		return sniffVerdict{}
	}
	var v sniffVerdict
	if c != nil && c.pending() {
		// A new connection to the same destination: the old one's held
		// Initials go first, as QUIC without a name.
		v.release, v.releaseAs = sn.resolve(c, sniffed{protocol: sniff.ProtocolQUIC})
	}
	if c == nil {
		c = sn.add(to)
	}
	c.dcid = append(c.dcid[:0], dcid...)
	c.used = sn.clock
	c.result = sniffed{protocol: sniff.ProtocolQUIC}
	if !more || !sn.makeRoom(len(p)) {
		c.result.domain = name
		v.s = c.result
		return v
	}
	c.held = [][]byte{bytes.Clone(p)}
	sn.pending++
	sn.heldBytes += len(p)
	v.hold = true
	return v
}

// more handles one more Initial of the pending connection c: it is held
// with the others until the ClientHello is whole, or until c has held its
// share, and then all go on the route it gives.
func (sn *sniffer) more(c *quicConn, p []byte) sniffVerdict {
	name, _, more := sniff.QUIC(append(c.held, p)...)
	if more && len(c.held) < maxHeldPerConn && sn.heldBytes+len(p) <= maxHeldBytes {
		c.held = append(c.held, bytes.Clone(p))
		sn.heldBytes += len(p)
		return sniffVerdict{hold: true}
	}
	s := sniffed{sniff.ProtocolQUIC, name}
	release, _ := sn.resolve(c, s)
	return sniffVerdict{s: s, release: release, releaseAs: s}
}

// resolve ends c's wait: it routes as s from now on. It returns the held
// datagrams, to be sent before anything else of the connection.
func (sn *sniffer) resolve(c *quicConn, s sniffed) ([][]byte, sniffed) {
	held := c.held
	for _, h := range held {
		sn.heldBytes -= len(h)
	}
	c.held = nil
	c.result = s
	sn.pending--
	return held, s
}

// makeRoom makes room to hold a new connection's first datagram of n bytes,
// dropping the oldest pending connections if need be. It is false when n
// alone is beyond the bound.
func (sn *sniffer) makeRoom(n int) bool {
	if n > maxHeldBytes {
		return false
	}
	for sn.pending >= maxPending || sn.heldBytes+n > maxHeldBytes {
		var oldest netx.Addr
		var o *quicConn
		for to, c := range sn.conns {
			if c.pending() && (o == nil || c.used < o.used) {
				oldest, o = to, c
			}
		}
		sn.resolve(o, sniffed{})
		delete(sn.conns, oldest)
	}
	return true
}

// add remembers a new connection toward to, forgetting the least recently
// used one that is not pending when the table is full.
func (sn *sniffer) add(to netx.Addr) *quicConn {
	if len(sn.conns) >= maxQUICConns {
		var lru netx.Addr
		var o *quicConn
		for a, c := range sn.conns {
			if !c.pending() && (o == nil || c.used < o.used) {
				lru, o = a, c
			}
		}
		delete(sn.conns, lru)
	}
	c := &quicConn{}
	sn.conns[to] = c
	return c
}
