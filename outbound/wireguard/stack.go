package wireguard

import (
	"net/netip"
	"os"
	"sync"

	"golang.zx2c4.com/wireguard/tun"

	"switchyard/internal/netstack"
)

var _ tun.Device = (*stackDevice)(nil)

// stackDevice is the TUN device of a tunnel: the userspace network stack
// (internal/netstack) with one interface holding the tunnel-local
// addresses, whose packets the WireGuard device reads and writes.
//
// The stack owns the queue of what it emits and refuses packets once
// closed (see netstack.Stack); events is sent on only by up, under mu, so
// nothing is sent on a closed channel.
type stackDevice struct {
	stack *netstack.Stack
	mtu   int

	closeOnce sync.Once
	mu        sync.Mutex // guards the fields below and the sends on events
	events    chan tun.Event
	announced bool // EventUp was delivered
	closed    bool // events is closed
}

// newStackDevice builds a stack holding each of local on its interface,
// with a default route for each family it has an address of.
func newStackDevice(local []netip.Addr, mtu int) (*stackDevice, error) {
	st, err := netstack.New(netstack.Options{Local: local, MTU: mtu})
	if err != nil {
		return nil, err
	}
	return &stackDevice{stack: st, mtu: mtu, events: make(chan tun.Event, 1)}, nil
}

// Read returns the next packet the stack emits, waiting for one. It fails
// with os.ErrClosed once the device is closed.
func (d *stackDevice) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	n, err := d.stack.ReadPacket(bufs[0][offset:])
	if err != nil {
		return 0, err
	}
	sizes[0] = n
	return 1, nil
}

// Write hands each packet to the stack as received on its interface, by
// the IP version in its first byte; a packet of no IP version is dropped.
// After Close the stack has no interface and drops them all.
func (d *stackDevice) Write(bufs [][]byte, offset int) (int, error) {
	for _, b := range bufs {
		d.stack.InjectPacket(b[offset:])
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

// Close stops the stack: it ends a pending Read and every connection and
// endpoint of the stack, and closes the events; it is idempotent.
func (d *stackDevice) Close() error {
	d.closeOnce.Do(func() {
		d.stack.Close()
		d.mu.Lock()
		d.closed = true
		close(d.events)
		d.mu.Unlock()
	})
	return nil
}
