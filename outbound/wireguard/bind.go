package wireguard

import (
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"

	"golang.zx2c4.com/wireguard/conn"
)

// udpSocket is what the bind needs of its socket; *net.UDPConn has it.
type udpSocket interface {
	ReadFromUDPAddrPort(b []byte) (int, netip.AddrPort, error)
	WriteToUDPAddrPort(b []byte, addr netip.AddrPort) (int, error)
	LocalAddr() net.Addr
	Close() error
}

// bind is the tunnel's one UDP socket toward its endpoint, made under the
// socket policy. It is the device's conn.Bind: it writes the reserved bytes
// into bytes 1..3 of every outgoing message and clears them on receipt, and
// like a connected socket it hears only the endpoint.
type bind struct {
	listen      func() (udpSocket, error) // a new socket under the policy
	endpoint    netip.AddrPort
	ep          *endpoint // the endpoint every received message is from
	reserved    [3]byte
	hasReserved bool

	mu   sync.Mutex                // serialises Open and Close
	sock atomic.Pointer[udpSocket] // the open socket, nil while closed

	failed   chan struct{} // closed once the open socket fails on its own
	failOnce sync.Once
	failErr  error // written before failed is closed
}

var _ conn.Bind = (*bind)(nil)

func newBind(listen func() (udpSocket, error), to netip.AddrPort, reserved [3]byte, hasReserved bool) *bind {
	to = netip.AddrPortFrom(to.Addr().Unmap(), to.Port())
	return &bind{
		listen:      listen,
		endpoint:    to,
		ep:          &endpoint{dst: to},
		reserved:    reserved,
		hasReserved: hasReserved,
		failed:      make(chan struct{}),
	}
}

// Open makes the socket; the port asked for is ignored, the system picks.
func (b *bind) Open(uint16) ([]conn.ReceiveFunc, uint16, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.sock.Load() != nil {
		return nil, 0, conn.ErrBindAlreadyOpen
	}
	s, err := b.listen()
	if err != nil {
		return nil, 0, fmt.Errorf("wireguard: the tunnel's UDP socket: %w", err)
	}
	b.sock.Store(&s)
	var port uint16
	if a, ok := s.LocalAddr().(*net.UDPAddr); ok {
		port = uint16(a.Port)
	}
	return []conn.ReceiveFunc{b.receiver(&s)}, port, nil
}

// receiver reads the messages of one socket. A read error while that
// socket is still the open one means the socket failed: the bind reports
// it, and the device's receive routine ends quietly either way.
func (b *bind) receiver(s *udpSocket) conn.ReceiveFunc {
	return func(bufs [][]byte, sizes []int, eps []conn.Endpoint) (int, error) {
		for {
			n, from, err := (*s).ReadFromUDPAddrPort(bufs[0])
			if err != nil {
				if b.sock.Load() == s {
					b.fail(err)
				}
				return 0, net.ErrClosed
			}
			if netip.AddrPortFrom(from.Addr().Unmap(), from.Port()) != b.endpoint {
				continue
			}
			clearReserved(bufs[0][:n])
			sizes[0], eps[0] = n, b.ep
			return 1, nil
		}
	}
}

// clearReserved zeroes bytes 1..3 of a received message, where a peer may
// have written its reserved bytes; WireGuard reads them as part of the
// message type.
func clearReserved(msg []byte) {
	if len(msg) > 3 {
		msg[1], msg[2], msg[3] = 0, 0, 0
	}
}

func (b *bind) fail(err error) {
	b.failOnce.Do(func() {
		b.failErr = err
		close(b.failed)
	})
}

// Close closes the open socket, if any.
func (b *bind) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.sock.Swap(nil)
	if s == nil {
		return nil
	}
	return (*s).Close()
}

// SetMark does nothing: the socket policy marks the socket when it is made.
func (b *bind) SetMark(uint32) error { return nil }

// Send writes each message to the endpoint, with the reserved bytes set.
func (b *bind) Send(bufs [][]byte, ep conn.Endpoint) error {
	e, ok := ep.(*endpoint)
	if !ok {
		return conn.ErrWrongEndpointType
	}
	s := b.sock.Load()
	if s == nil {
		return net.ErrClosed
	}
	for _, msg := range bufs {
		if b.hasReserved && len(msg) > 3 {
			copy(msg[1:4], b.reserved[:])
		}
		if _, err := (*s).WriteToUDPAddrPort(msg, e.dst); err != nil {
			return err
		}
	}
	return nil
}

// ParseEndpoint parses the ip:port of the device's configuration.
func (b *bind) ParseEndpoint(text string) (conn.Endpoint, error) {
	ap, err := netip.ParseAddrPort(text)
	if err != nil {
		return nil, err
	}
	ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	if ap == b.endpoint {
		return b.ep, nil
	}
	return &endpoint{dst: ap}, nil
}

// BatchSize is one message per read and per send.
func (b *bind) BatchSize() int { return 1 }

// endpoint is the peer's address.
type endpoint struct{ dst netip.AddrPort }

var _ conn.Endpoint = (*endpoint)(nil)

func (e *endpoint) ClearSrc()           {}
func (e *endpoint) SrcToString() string { return "" }
func (e *endpoint) DstToString() string { return e.dst.String() }
func (e *endpoint) DstIP() netip.Addr   { return e.dst.Addr() }
func (e *endpoint) SrcIP() netip.Addr   { return netip.Addr{} }

// DstToBytes identifies the peer's address for the cookie mechanism.
func (e *endpoint) DstToBytes() []byte {
	b, _ := e.dst.MarshalBinary()
	return b
}
