package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"
)

// socksReplyText names the SOCKS5 reply codes (RFC 1928 §6).
var socksReplyText = map[byte]string{
	1: "general failure",
	2: "connection not allowed by ruleset",
	3: "network unreachable",
	4: "host unreachable",
	5: "connection refused",
	6: "TTL expired",
	7: "command not supported",
	8: "address type not supported",
}

// dialSOCKS connects to the SOCKS5 proxy at proxy, asks it (no
// authentication) to CONNECT to dst, and returns the connection once the
// proxy has answered with success. The deadline bounds the whole handshake
// and is cleared before returning.
func dialSOCKS(proxy string, dst netip.AddrPort, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", proxy, timeout)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(timeout))
	if err := socksConnect(c, dst); err != nil {
		c.Close()
		return nil, err
	}
	c.SetDeadline(time.Time{})
	return c, nil
}

// socksConnect runs the client side of a SOCKS5 CONNECT on c: the method
// negotiation (offering only "no authentication"), the request, and the
// reply, whose bound address it reads and discards.
func socksConnect(c net.Conn, dst netip.AddrPort) error {
	var b [4 + 16 + 2 + 2]byte // largest request: IPv6 destination
	if _, err := c.Write([]byte{5, 1, 0}); err != nil {
		return fmt.Errorf("socks greeting: %w", err)
	}
	if _, err := io.ReadFull(c, b[:2]); err != nil {
		return fmt.Errorf("socks method reply: %w", err)
	}
	if b[0] != 5 || b[1] != 0 {
		return fmt.Errorf("socks method reply: version %d method %d", b[0], b[1])
	}

	req := b[:0]
	req = append(req, 5, 1, 0) // version, CONNECT, reserved
	ip := dst.Addr().Unmap()
	if ip.Is4() {
		a := ip.As4()
		req = append(req, 1)
		req = append(req, a[:]...)
	} else {
		a := ip.As16()
		req = append(req, 4)
		req = append(req, a[:]...)
	}
	req = binary.BigEndian.AppendUint16(req, dst.Port())
	if _, err := c.Write(req); err != nil {
		return fmt.Errorf("socks request: %w", err)
	}

	var head [4]byte
	if _, err := io.ReadFull(c, head[:]); err != nil {
		return fmt.Errorf("socks reply: %w", err)
	}
	if head[0] != 5 {
		return fmt.Errorf("socks reply: version %d", head[0])
	}
	if head[1] != 0 {
		text := socksReplyText[head[1]]
		if text == "" {
			text = "unknown code"
		}
		return fmt.Errorf("socks reply: %s (%d)", text, head[1])
	}
	var rest int
	switch head[3] {
	case 1:
		rest = 4 + 2
	case 4:
		rest = 16 + 2
	case 3:
		var l [1]byte
		if _, err := io.ReadFull(c, l[:]); err != nil {
			return fmt.Errorf("socks reply: %w", err)
		}
		rest = int(l[0]) + 2
	default:
		return errors.New("socks reply: bad address type")
	}
	var skip [255 + 2]byte
	if _, err := io.ReadFull(c, skip[:rest]); err != nil {
		return fmt.Errorf("socks reply: %w", err)
	}
	return nil
}
