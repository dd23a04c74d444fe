// Package netx holds the value types every layer shares (addresses, flows,
// datagram links) and the dialers that open sockets under the socket policy.
package netx

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
)

// Addr is a destination: a domain name or an IP, and a port. Exactly one of
// Name and IP is set for a valid address.
type Addr struct {
	Name string
	IP   netip.Addr
	Port uint16
}

// AddrFromAddrPort returns the IP address ap as an Addr. An IPv4-mapped IPv6
// address is unmapped so that it compares equal to its IPv4 form.
func AddrFromAddrPort(ap netip.AddrPort) Addr {
	return Addr{IP: ap.Addr().Unmap(), Port: ap.Port()}
}

// DomainAddr returns a name address.
func DomainAddr(name string, port uint16) Addr { return Addr{Name: name, Port: port} }

// IsName reports whether the address names a host rather than an IP.
func (a Addr) IsName() bool { return a.Name != "" }

// IsValid reports whether the address has a host.
func (a Addr) IsValid() bool { return a.Name != "" || a.IP.IsValid() }

// AddrPort returns the IP address and port; ok is false for a name.
func (a Addr) AddrPort() (ap netip.AddrPort, ok bool) {
	if !a.IP.IsValid() {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(a.IP, a.Port), true
}

// Host returns the name or the IP in text form, without brackets.
func (a Addr) Host() string {
	if a.Name != "" {
		return a.Name
	}
	if a.IP.IsValid() {
		return a.IP.String()
	}
	return ""
}

// String returns host:port, with brackets around an IPv6 address.
func (a Addr) String() string {
	return net.JoinHostPort(a.Host(), strconv.Itoa(int(a.Port)))
}

// ErrBadAddr is returned by ParseAddr for text that is not host:port.
var ErrBadAddr = errors.New("bad address")

// ParseAddr parses "host:port" ("[v6]:port" for IPv6). A host that parses as
// an IP becomes an IP address; anything else is a name.
func ParseAddr(s string) (Addr, error) {
	host, portText, err := net.SplitHostPort(s)
	if err != nil {
		return Addr{}, fmt.Errorf("%w %q: %v", ErrBadAddr, s, err)
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return Addr{}, fmt.Errorf("%w %q: port must be a number from 0 to 65535", ErrBadAddr, s)
	}
	if host == "" {
		return Addr{}, fmt.Errorf("%w %q: missing host", ErrBadAddr, s)
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip.Zone() != "" {
			return Addr{}, fmt.Errorf("%w %q: zoned addresses are not supported", ErrBadAddr, s)
		}
		return Addr{IP: ip.Unmap(), Port: uint16(port)}, nil
	}
	if !validName(host) {
		return Addr{}, fmt.Errorf("%w %q: %q is neither an IP nor a host name", ErrBadAddr, s, host)
	}
	return Addr{Name: host, Port: uint16(port)}, nil
}

func validName(h string) bool {
	if len(h) > 253 {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '.', c == '_':
		default:
			return false
		}
	}
	return true
}
