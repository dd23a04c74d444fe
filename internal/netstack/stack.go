// Package netstack is the userspace network stack (gVisor) the process
// runs its own TCP/IP on: one interface whose packets the caller carries
// (a WireGuard tunnel's device, a TUN inbound's kernel device), the
// addresses it holds and routes for both families.
//
// The stack owns no channel it sends on: it queues what it emits on the
// interface's link endpoint, whatever goroutine emits it (a flow's write,
// a timer, a reset), and that queue refuses packets once closed.
// ReadPacket waits on the queue and on a context that Close cancels, so
// packets emitted while the stack closes are dropped, never sent on a
// closed channel.
package netstack

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"time"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/link/channel"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv6"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/icmp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"
)

// NIC is the one interface of a stack.
const NIC tcpip.NICID = 1

// DefaultQueue is how many packets the stack may emit before they are
// read; a packet emitted onto a full queue is dropped.
const DefaultQueue = 1024

// Options describe a stack.
type Options struct {
	// Local are the addresses the interface holds; a default route is
	// added for each family one of them has.
	Local []netip.Addr
	MTU   int
	// Queue bounds the packets emitted and not yet read (DefaultQueue
	// when 0).
	Queue int
	// Transparent makes the stack take packets to any address and answer
	// from any address (a TUN inbound: every destination is local to it),
	// with default routes of both families whatever Local holds.
	Transparent bool
	// TCPBuffer, when > 0, caps each TCP connection's send and receive
	// buffers (bytes): the stack's memory per connection. The receive
	// buffer starts at TCPBufferStart (when > 0 and smaller) and grows
	// toward the cap as the connection's throughput asks (receive buffer
	// moderation, as Linux's tcp_rmem).
	TCPBuffer      int
	TCPBufferStart int
	// TimeWait, when > 0, is how long a closed TCP connection stays in
	// TIME-WAIT (gVisor's default: 60 s). Over a local link, where no old
	// segment can arrive late, a short one frees the 4-tuple for the next
	// connection of the same application port.
	TimeWait time.Duration
}

// Stack is a userspace network stack with one interface.
type Stack struct {
	s           *stack.Stack
	ep          *link
	mtu         int
	transparent bool
	batch       batcher

	ctx    context.Context // cancelled by Close: ends a pending ReadPacket
	cancel context.CancelFunc

	closeOnce sync.Once
}

// New builds a stack as o describes.
func New(o Options) (*Stack, error) {
	s := stack.New(stack.Options{
		NetworkProtocols:   []stack.NetworkProtocolFactory{ipv4.NewProtocol, ipv6.NewProtocol},
		TransportProtocols: []stack.TransportProtocolFactory{tcp.NewProtocol, udp.NewProtocol, icmp.NewProtocol4, icmp.NewProtocol6},
		HandleLocal:        !o.Transparent,
	})
	q := o.Queue
	if q <= 0 {
		q = DefaultQueue
	}
	ctx, cancel := context.WithCancel(context.Background())
	st := &Stack{
		s:      s,
		ep:     &link{Endpoint: channel.New(q, uint32(o.MTU), "")},
		mtu:    o.MTU,
		ctx:    ctx,
		cancel: cancel,
	}
	if err := st.configure(o); err != nil {
		st.Close()
		return nil, err
	}
	return st, nil
}

func (st *Stack) configure(o Options) error {
	sack := tcpip.TCPSACKEnabled(true) // off by default
	if err := st.s.SetTransportProtocolOption(tcp.ProtocolNumber, &sack); err != nil {
		return fmt.Errorf("could not enable TCP SACK: %v", err)
	}
	if o.TCPBuffer > 0 {
		min := min(4096, o.TCPBuffer)
		start := o.TCPBuffer
		if o.TCPBufferStart > 0 && o.TCPBufferStart < start {
			start = o.TCPBufferStart
		}
		snd := tcpip.TCPSendBufferSizeRangeOption{Min: min, Default: start, Max: o.TCPBuffer}
		rcv := tcpip.TCPReceiveBufferSizeRangeOption{Min: min, Default: start, Max: o.TCPBuffer}
		moderate := tcpip.TCPModerateReceiveBufferOption(true)
		if err := st.s.SetTransportProtocolOption(tcp.ProtocolNumber, &moderate); err != nil {
			return fmt.Errorf("TCP receive buffer moderation: %v", err)
		}
		if err := st.s.SetTransportProtocolOption(tcp.ProtocolNumber, &snd); err != nil {
			return fmt.Errorf("TCP send buffer %d: %v", o.TCPBuffer, err)
		}
		if err := st.s.SetTransportProtocolOption(tcp.ProtocolNumber, &rcv); err != nil {
			return fmt.Errorf("TCP receive buffer %d: %v", o.TCPBuffer, err)
		}
	}
	if o.TimeWait > 0 {
		tw := tcpip.TCPTimeWaitTimeoutOption(o.TimeWait)
		if err := st.s.SetTransportProtocolOption(tcp.ProtocolNumber, &tw); err != nil {
			return fmt.Errorf("TCP TIME-WAIT %v: %v", o.TimeWait, err)
		}
	}
	if o.Transparent {
		// The packets come from the kernel's own device: their checksums
		// are not verified again, but for TCP's, which GRO verifies
		// before it coalesces (InjectBatch).
		st.transparent = true
		st.ep.LinkEPCapabilities |= stack.CapabilityRXChecksumOffload
		st.batch.gro.Init(true)
	}
	if err := st.s.CreateNIC(NIC, st.ep); err != nil {
		return fmt.Errorf("CreateNIC: %v", err)
	}
	var v4, v6 bool
	for _, ip := range o.Local {
		a := tcpip.ProtocolAddress{
			Protocol:          ProtocolOf(ip),
			AddressWithPrefix: tcpip.AddrFromSlice(ip.AsSlice()).WithPrefix(),
		}
		if err := st.s.AddProtocolAddress(NIC, a, stack.AddressProperties{}); err != nil {
			return fmt.Errorf("AddProtocolAddress(%v): %v", ip, err)
		}
		v4, v6 = v4 || ip.Is4(), v6 || ip.Is6()
	}
	if o.Transparent {
		if err := st.s.SetPromiscuousMode(NIC, true); err != nil {
			return fmt.Errorf("SetPromiscuousMode: %v", err)
		}
		if err := st.s.SetSpoofing(NIC, true); err != nil {
			return fmt.Errorf("SetSpoofing: %v", err)
		}
		v4, v6 = true, true
	}
	if v4 {
		st.s.AddRoute(tcpip.Route{Destination: header.IPv4EmptySubnet, NIC: NIC})
	}
	if v6 {
		st.s.AddRoute(tcpip.Route{Destination: header.IPv6EmptySubnet, NIC: NIC})
	}
	return nil
}

// ProtocolOf is the network protocol of ip; anything not IPv4 is IPv6, as
// an unspecified address stands for both families.
func ProtocolOf(ip netip.Addr) tcpip.NetworkProtocolNumber {
	if ip.Is4() {
		return ipv4.ProtocolNumber
	}
	return ipv6.ProtocolNumber
}

// MTU is the interface's MTU.
func (st *Stack) MTU() int { return st.mtu }

// Stack is the gVisor stack itself, for the handlers a caller installs.
func (st *Stack) Stack() *stack.Stack { return st.s }

// ReadPacket copies the next packet the stack emits into dst, waiting for
// one, and returns its length. It fails with os.ErrClosed once the stack is
// closed.
func (st *Stack) ReadPacket(dst []byte) (int, error) {
	pkt := st.ep.ReadContext(st.ctx)
	if pkt == nil {
		return 0, os.ErrClosed
	}
	n := copyPacket(dst, pkt)
	pkt.DecRef()
	return n, nil
}

// ReadPackets waits for the next packet the stack emits and copies it and
// those already queued after it, up to len(bufs), into bufs[i][offset:],
// their lengths into sizes; it returns how many. It fails with
// os.ErrClosed once the stack is closed.
func (st *Stack) ReadPackets(bufs [][]byte, sizes []int, offset int) (int, error) {
	pkt := st.ep.ReadContext(st.ctx)
	if pkt == nil {
		return 0, os.ErrClosed
	}
	n := 0
	for pkt != nil {
		sizes[n] = copyPacket(bufs[n][offset:], pkt)
		pkt.DecRef()
		if n++; n == len(bufs) {
			break
		}
		pkt = st.ep.Read()
	}
	return n, nil
}

// copyPacket copies pkt, from its first header on, into dst and returns
// its length there.
func copyPacket(dst []byte, pkt *stack.PacketBuffer) int {
	views, skip := pkt.AsViewList()
	n := 0
	for v := views.Front(); v != nil; v = v.Next() {
		b := v.AsSlice()
		if skip >= len(b) {
			skip -= len(b)
			continue
		}
		n += copy(dst[n:], b[skip:])
		skip = 0
	}
	return n
}

// InjectPacket hands p to the stack as received on its interface, by the
// IP version in its first byte; a packet of no IP version is dropped, and
// so is every packet after Close. p is copied.
func (st *Stack) InjectPacket(p []byte) { st.InjectReceived(p, false) }

// InjectReceived hands p to the stack as InjectPacket does; with
// validated the stack trusts its transport checksum (a packet the local
// kernel handed over with the checksum left to offload, or a segment it
// did not cut). p is copied.
func (st *Stack) InjectReceived(p []byte, validated bool) {
	if len(p) == 0 {
		return
	}
	var proto tcpip.NetworkProtocolNumber
	switch p[0] >> 4 {
	case 4:
		proto = header.IPv4ProtocolNumber
	case 6:
		proto = header.IPv6ProtocolNumber
	default:
		return
	}
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(p)})
	pkt.RXChecksumValidated = validated
	st.ep.InjectInbound(proto, pkt)
	pkt.DecRef()
}

// Close stops the stack. It ends a pending ReadPacket and every connection
// and endpoint of the stack; it is idempotent.
//
// Cancelling the context ends ReadPacket. Removing the interface detaches
// the link endpoint, so injected packets are dropped, and closes the
// endpoint's queue, which whatever goroutine emits a packet checks under
// the queue's lock before sending on it (closing the endpoint again covers
// an interface that was never created).
func (st *Stack) Close() {
	st.closeOnce.Do(func() {
		st.cancel()
		st.s.RemoveNIC(NIC)
		st.s.Close()
		st.ep.Close()
	})
}
