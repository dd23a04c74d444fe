package netx

import (
	"fmt"
	"net/netip"
	"syscall"
	"time"
)

// SocketInfo describes a socket the policy is applied to, for the hook.
type SocketInfo struct {
	Network string // tcp4, tcp6, udp4 or udp6
	Address string // the address being dialed or bound
	FD      uintptr
}

// SocketPolicy is applied to every socket the process opens toward the
// network, between creating it and binding or connecting it.
type SocketPolicy struct {
	Mark      uint32 // SO_MARK; 0 = unset
	Interface string // SO_BINDTODEVICE; "" = unset
	// BindV4 and BindV6 are the local addresses bound per family; an unset
	// one binds the family's wildcard.
	BindV4, BindV6 netip.Addr
	// TCPKeepAliveIdle is the keepalive idle time of direct TCP; 0 leaves
	// the OS default (no keepalive).
	TCPKeepAliveIdle time.Duration
	// Hook, when set, sees every socket after the options above and may
	// refuse it: its error fails the socket and the dial.
	Hook func(SocketInfo) error
}

// NewSocketPolicy builds a policy from configured values; bind holds at most
// one address per family.
func NewSocketPolicy(mark uint32, iface string, bind []netip.Addr, keepAliveIdle time.Duration) (SocketPolicy, error) {
	p := SocketPolicy{Mark: mark, Interface: iface, TCPKeepAliveIdle: keepAliveIdle}
	for _, a := range bind {
		a = a.Unmap()
		if a.Is4() {
			if p.BindV4.IsValid() {
				return p, fmt.Errorf("two bind addresses of family IPv4: %s and %s", p.BindV4, a)
			}
			p.BindV4 = a
		} else {
			if p.BindV6.IsValid() {
				return p, fmt.Errorf("two bind addresses of family IPv6: %s and %s", p.BindV6, a)
			}
			p.BindV6 = a
		}
	}
	return p, nil
}

// bindFor returns the configured local address of ip's family, if any.
func (p *SocketPolicy) bindFor(v4 bool) netip.Addr {
	if v4 {
		return p.BindV4
	}
	return p.BindV6
}

// Control is a net.Dialer / net.ListenConfig Control function applying the
// policy.
func (p *SocketPolicy) Control(network, address string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = p.apply(network, address, fd)
	})
	if err != nil {
		return err
	}
	return serr
}

func (p *SocketPolicy) apply(network, address string, fd uintptr) error {
	if p.Interface != "" {
		if err := bindToDevice(fd, p.Interface); err != nil {
			return fmt.Errorf("socket policy: interface %s: %w", p.Interface, err)
		}
	}
	if p.Mark != 0 {
		if err := setMark(fd, p.Mark); err != nil {
			return fmt.Errorf("socket policy: mark %d: %w", p.Mark, err)
		}
	}
	if p.Hook != nil {
		return p.Hook(SocketInfo{Network: network, Address: address, FD: fd})
	}
	return nil
}
