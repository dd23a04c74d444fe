// Package block is the outbound that drops everything: a stream is refused
// by rule, a datagram is swallowed.
package block

import (
	"context"
	"net"
	"sync"

	"switchyard/netx"
	"switchyard/outbound"
)

// Outbound is the block outbound.
type Outbound struct{}

var (
	_ outbound.Outbound = (*Outbound)(nil)
	_ outbound.Networks = (*Outbound)(nil)
)

// New returns the block outbound. It opens nothing.
func New() *Outbound { return &Outbound{} }

// DialStream refuses the flow with outbound.ErrBlocked, which inbounds answer
// as a refusal by rule.
func (*Outbound) DialStream(context.Context, netx.Flow) (net.Conn, error) {
	return nil, outbound.ErrBlocked
}

// CarriesUDP reports true (outbound.Networks): DialPacket opens a link,
// one that swallows every datagram. block is a terminal action rather than
// a path to the destination; the group layer treats it as such whatever
// this says, and never replaces it by another member.
func (*Outbound) CarriesUDP() bool { return true }

// DialPacket returns a link that reports every packet sent in full and never
// receives one, so a blocked peer's packets vanish without harming the rest
// of its association.
func (*Outbound) DialPacket(context.Context, netx.Flow) (netx.PacketLink, error) {
	return &Link{closed: make(chan struct{})}, nil
}

// Link swallows datagrams.
type Link struct {
	once   sync.Once
	closed chan struct{}
}

func (l *Link) WritePacket(p []byte, _ netx.Addr) error {
	select {
	case <-l.closed:
		return net.ErrClosed
	default:
		return nil
	}
}

var _ netx.PacketWaiter = (*Link)(nil)

// WaitPacket blocks until Close, as ReadPacket does, so that the reader
// holds no buffer meanwhile (netx.PacketWaiter).
func (l *Link) WaitPacket() (int, error) {
	<-l.closed
	return 0, net.ErrClosed
}

func (l *Link) ReadPacket([]byte) (int, netx.Addr, error) {
	<-l.closed
	return 0, netx.Addr{}, net.ErrClosed
}

func (l *Link) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}
