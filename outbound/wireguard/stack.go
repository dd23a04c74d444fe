package wireguard

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"sync"

	"golang.zx2c4.com/wireguard/tun"
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

// stackNIC is the one interface of a tunnel's stack.
const stackNIC tcpip.NICID = 1

// stackQueue is how many packets the stack may emit before the device
// reads them; a packet emitted onto a full queue is dropped.
const stackQueue = 1024

var _ tun.Device = (*stackDevice)(nil)

// stackDevice is the TUN device of a tunnel: a userspace network stack with
// one interface holding the tunnel-local addresses, whose packets the
// WireGuard device reads and writes.
//
// It owns no channel the stack sends on. The stack queues what it emits on
// the interface's link endpoint, whatever goroutine emits it (a flow's
// write, a timer, a reset), and that queue refuses packets once closed;
// Read waits on the queue and on a context that Close cancels. So packets
// emitted while the device closes are dropped, never sent on a closed
// channel.
type stackDevice struct {
	stack *stack.Stack
	ep    *channel.Endpoint
	mtu   int

	ctx    context.Context // cancelled by Close: ends a pending Read
	cancel context.CancelFunc

	closeOnce sync.Once
	mu        sync.Mutex // guards the fields below and the sends on events
	events    chan tun.Event
	announced bool // EventUp was delivered
	closed    bool // events is closed
}

// newStackDevice builds a stack holding each of local on its interface,
// with a default route for each family it has an address of.
func newStackDevice(local []netip.Addr, mtu int) (*stackDevice, error) {
	s := stack.New(stack.Options{
		NetworkProtocols:   []stack.NetworkProtocolFactory{ipv4.NewProtocol, ipv6.NewProtocol},
		TransportProtocols: []stack.TransportProtocolFactory{tcp.NewProtocol, udp.NewProtocol, icmp.NewProtocol4, icmp.NewProtocol6},
		HandleLocal:        true,
	})
	ctx, cancel := context.WithCancel(context.Background())
	d := &stackDevice{
		stack:  s,
		ep:     channel.New(stackQueue, uint32(mtu), ""),
		mtu:    mtu,
		ctx:    ctx,
		cancel: cancel,
		events: make(chan tun.Event, 1),
	}
	if err := d.configure(local); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

func (d *stackDevice) configure(local []netip.Addr) error {
	sack := tcpip.TCPSACKEnabled(true) // off by default
	if err := d.stack.SetTransportProtocolOption(tcp.ProtocolNumber, &sack); err != nil {
		return fmt.Errorf("could not enable TCP SACK: %v", err)
	}
	if err := d.stack.CreateNIC(stackNIC, d.ep); err != nil {
		return fmt.Errorf("CreateNIC: %v", err)
	}
	var v4, v6 bool
	for _, ip := range local {
		a := tcpip.ProtocolAddress{
			Protocol:          protocolOf(ip),
			AddressWithPrefix: tcpip.AddrFromSlice(ip.AsSlice()).WithPrefix(),
		}
		if err := d.stack.AddProtocolAddress(stackNIC, a, stack.AddressProperties{}); err != nil {
			return fmt.Errorf("AddProtocolAddress(%v): %v", ip, err)
		}
		v4, v6 = v4 || ip.Is4(), v6 || ip.Is6()
	}
	if v4 {
		d.stack.AddRoute(tcpip.Route{Destination: header.IPv4EmptySubnet, NIC: stackNIC})
	}
	if v6 {
		d.stack.AddRoute(tcpip.Route{Destination: header.IPv6EmptySubnet, NIC: stackNIC})
	}
	return nil
}

// protocolOf is the network protocol of ip; anything not IPv4 is IPv6, as
// an unspecified address stands for both families.
func protocolOf(ip netip.Addr) tcpip.NetworkProtocolNumber {
	if ip.Is4() {
		return ipv4.ProtocolNumber
	}
	return ipv6.ProtocolNumber
}

// Read returns the next packet the stack emits, waiting for one. It fails
// with os.ErrClosed once the device is closed.
func (d *stackDevice) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	pkt := d.ep.ReadContext(d.ctx)
	if pkt == nil {
		return 0, os.ErrClosed
	}
	sizes[0] = copyPacket(bufs[0][offset:], pkt)
	pkt.DecRef()
	return 1, nil
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

// Write hands each packet to the stack as received on its interface, by
// the IP version in its first byte; a packet of no IP version is dropped.
// After Close the stack has no interface and drops them all.
func (d *stackDevice) Write(bufs [][]byte, offset int) (int, error) {
	for _, b := range bufs {
		p := b[offset:]
		if len(p) == 0 {
			continue
		}
		var proto tcpip.NetworkProtocolNumber
		switch p[0] >> 4 {
		case 4:
			proto = header.IPv4ProtocolNumber
		case 6:
			proto = header.IPv6ProtocolNumber
		default:
			continue
		}
		pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(p)})
		d.ep.InjectInbound(proto, pkt)
		pkt.DecRef()
	}
	return len(bufs), nil
}

// up delivers tun.EventUp, once: the tunnel calls it after bringing the
// WireGuard device up itself, so the event finds the device already up.
func (d *stackDevice) up() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed || d.announced {
		return
	}
	d.announced = true
	d.events <- tun.EventUp // the buffer has room for this one event
}

func (d *stackDevice) Events() <-chan tun.Event { return d.events }
func (d *stackDevice) MTU() (int, error)        { return d.mtu, nil }
func (d *stackDevice) Name() (string, error)    { return "wireguard", nil }
func (d *stackDevice) File() *os.File           { return nil }
func (d *stackDevice) BatchSize() int           { return 1 }

// Close stops the stack. It ends a pending Read and every connection and
// endpoint of the stack; it is idempotent.
//
// Nothing it closes is sent on unguarded. Cancelling the context ends Read.
// Removing the interface detaches the link endpoint, so Write's packets are
// dropped, and closes the endpoint's queue, which whatever goroutine emits
// a packet checks under the queue's lock before sending on it (closing the
// endpoint again covers an interface that was never created). events is
// sent on only by up, under mu.
func (d *stackDevice) Close() error {
	d.closeOnce.Do(func() {
		d.cancel()
		d.stack.RemoveNIC(stackNIC)
		d.stack.Close()
		d.ep.Close()
		d.mu.Lock()
		d.closed = true
		close(d.events)
		d.mu.Unlock()
	})
	return nil
}
