package serve

import (
	"crypto/subtle"
	"io"
	"net"
	"net/netip"

	"switchyard/spec"
)

// PrefixReader reads Head first, then R. Head holds what is left of it.
type PrefixReader struct {
	Head []byte
	R    io.Reader
}

func (p *PrefixReader) Read(b []byte) (int, error) {
	if len(p.Head) > 0 {
		n := copy(b, p.Head)
		p.Head = p.Head[n:]
		return n, nil
	}
	return p.R.Read(b)
}

// Authenticate reports whether user and pass are those of one of users.
// Every entry is compared, each in constant time.
func Authenticate(users []spec.User, user, pass string) bool {
	match := 0
	for _, u := range users {
		match |= subtle.ConstantTimeCompare([]byte(u.Username), []byte(user)) &
			subtle.ConstantTimeCompare([]byte(u.Password), []byte(pass))
	}
	return match == 1
}

// AddrPort returns the IP and port of a TCP or UDP address, the IP
// unmapped; the zero AddrPort for any other address.
func AddrPort(a net.Addr) netip.AddrPort {
	var ap netip.AddrPort
	switch a := a.(type) {
	case *net.TCPAddr:
		ap = a.AddrPort()
	case *net.UDPAddr:
		ap = a.AddrPort()
	default:
		return netip.AddrPort{}
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}
