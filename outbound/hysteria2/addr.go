package hysteria2

import "switchyard/netx"

// maxUDPSize is the largest UDP message a session sends whole: core/v2
// builds each message, header included, in a buffer of this size before it
// fragments it over QUIC datagrams, and silently drops a larger one.
const maxUDPSize = 4096

// udpHeaderSize is the size of a UDP message's header naming addr: session
// ID, packet ID, fragment ID and count, and the address with its varint
// length.
func udpHeaderSize(addr string) int {
	return 4 + 2 + 1 + 1 + varintLen(len(addr)) + len(addr)
}

func varintLen(n int) int {
	switch {
	case n <= 63:
		return 1
	case n <= 16383:
		return 2
	case n <= 1073741823:
		return 4
	}
	return 8
}

// parseAuthority reads the source of a reply, "host:port" as the server
// wrote it. An address that does not parse, or whose port is 0, is refused:
// such a reply cannot be attributed to a peer.
func parseAuthority(s string) (netx.Addr, bool) {
	a, err := netx.ParseAddr(s)
	if err != nil || a.Port == 0 {
		return netx.Addr{}, false
	}
	return a, true
}

// maxAuthorities bounds the authority cache of one link.
const maxAuthorities = 256

// authorities remembers the text form of the peers a link sends to, so a
// steady flow of packets formats no address. It is used by one goroutine.
type authorities struct{ m map[netx.Addr]string }

// format returns a's authority: host:port, an IPv6 address in brackets, a
// domain as the name for the server to resolve.
func (c *authorities) format(a netx.Addr) string {
	if s, ok := c.m[a]; ok {
		return s
	}
	if c.m == nil {
		c.m = make(map[netx.Addr]string)
	} else if len(c.m) >= maxAuthorities {
		clear(c.m)
	}
	s := a.String()
	c.m[a] = s
	return s
}
