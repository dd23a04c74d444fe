// Package wireaddr holds what the address codecs of the protocols share,
// whatever their byte layout: which addresses can be written, and how a
// domain name read from the network becomes a netx.Addr.
package wireaddr

import (
	"errors"
	"fmt"
	"net/netip"

	"switchyard/netx"
)

// MaxNameLen is the longest domain name an address can carry: its length
// travels in one byte.
const MaxNameLen = 255

// Check reports whether a can be written: an IP, or a name of 1 to
// MaxNameLen bytes.
func Check(a netx.Addr) error {
	switch {
	case a.IP.IsValid():
		return nil
	case a.Name == "":
		return errors.New("address has no host")
	case len(a.Name) > MaxNameLen:
		return fmt.Errorf("domain name of %d bytes is longer than %d", len(a.Name), MaxNameLen)
	}
	return nil
}

// Host decodes a domain name read from the network and its port. A name no
// resolver could use (control bytes, spaces, bytes outside ASCII:
// international names travel in punycode) is refused. A name that is an IP
// in text becomes that IP, which routing wants. names, when not nil,
// supplies a string equal to a name decoded recently, so that none is
// allocated.
func Host(raw []byte, port uint16, names *Names) (netx.Addr, error) {
	for _, c := range raw {
		if c <= ' ' || c >= 0x7f {
			return netx.Addr{}, fmt.Errorf("domain name %q holds byte %#02x", raw, c)
		}
	}
	if ip, ok := ipText(raw); ok {
		return netx.Addr{IP: ip, Port: port}, nil
	}
	return netx.Addr{Name: names.intern(raw), Port: port}, nil
}

// ipText parses an IP literal written as a name. Only names made of hex
// digits, dots and colons are tried, so other names cost no allocation.
func ipText(raw []byte) (netip.Addr, bool) {
	for _, c := range raw {
		switch {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'f', c >= 'A' && c <= 'F', c == '.', c == ':':
		default:
			return netip.Addr{}, false
		}
	}
	ip, err := netip.ParseAddr(string(raw))
	if err != nil {
		return netip.Addr{}, false
	}
	return ip.Unmap(), true
}

// Names holds the last few names decoded, so that an address naming one of
// them again reuses its string. The zero value is ready; it belongs to one
// reader.
type Names struct {
	names [4]string
	next  uint8
}

// intern returns raw as a string; a nil cache always allocates.
func (c *Names) intern(raw []byte) string {
	if c == nil {
		return string(raw)
	}
	for _, s := range c.names {
		if s == string(raw) {
			return s
		}
	}
	s := string(raw)
	c.names[c.next] = s
	c.next = (c.next + 1) % uint8(len(c.names))
	return s
}
