package hysteria2

import (
	"errors"
	"net"
	"sync"

	"github.com/apernet/hysteria/core/v2/server"
)

// heldOutbound is a server-side outbound whose TCP dials wait until
// released: a destination the server is still trying to reach.
type heldOutbound struct {
	gate chan struct{}
	once sync.Once
}

func newHeldOutbound() *heldOutbound { return &heldOutbound{gate: make(chan struct{})} }

func (h *heldOutbound) release() { h.once.Do(func() { close(h.gate) }) }

func (h *heldOutbound) TCP(string) (net.Conn, error) {
	<-h.gate
	return nil, errors.New("released")
}

func (h *heldOutbound) UDP(string) (server.UDPConn, error) { return nil, errors.New("no UDP here") }
func (h *heldOutbound) CheckUDP(string) error              { return nil }

// badSourceOutbound is a server-side outbound whose UDP replies arrive
// first under an address that does not parse, then under port 0, then
// under their real source.
type badSourceOutbound struct{}

func (badSourceOutbound) TCP(addr string) (net.Conn, error) { return net.Dial("tcp", addr) }
func (badSourceOutbound) CheckUDP(string) error             { return nil }

func (badSourceOutbound) UDP(string) (server.UDPConn, error) {
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, err
	}
	return &badSourceConn{c: c}, nil
}

type badSourceConn struct {
	c       *net.UDPConn
	pending []byte
	from    string
	step    int
}

func (b *badSourceConn) ReadFrom(p []byte) (int, string, error) {
	if b.step == 0 {
		n, from, err := b.c.ReadFrom(p)
		if err != nil {
			return 0, "", err
		}
		b.pending, b.from, b.step = append(b.pending[:0], p[:n]...), from.String(), 1
	}
	n := copy(p, b.pending)
	switch b.step {
	case 1:
		b.step = 2
		return n, "not an address", nil
	case 2:
		b.step = 3
		return n, "127.0.0.1:0", nil
	}
	b.step = 0
	return n, b.from, nil
}

func (b *badSourceConn) WriteTo(p []byte, addr string) (int, error) {
	ua, err := net.ResolveUDPAddr("udp4", addr)
	if err != nil {
		return 0, err
	}
	return b.c.WriteTo(p, ua)
}

func (b *badSourceConn) Close() error { return b.c.Close() }
