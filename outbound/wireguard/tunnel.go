package wireguard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/tun"
	"golang.zx2c4.com/wireguard/tun/netstack"

	"switchyard/netx"
)

var (
	// ErrNoLocalAddress is the start failure of an outbound without
	// tunnel-local addresses.
	ErrNoLocalAddress = errors.New("wireguard: no tunnel-local addresses configured")
	// ErrEndpointNotResolved is the start failure of an endpoint name that
	// leaves no address.
	ErrEndpointNotResolved = errors.New("wireguard: endpoint domain did not resolve")
)

// tunnel is one running device: the WireGuard device, its userspace network
// stack and its socket. Its driver is the device's goroutines; the tunnel
// is dead once they ended or its socket failed.
type tunnel struct {
	dev     *device.Device
	net     *netstack.Net
	bind    *bind
	started time.Time

	nextPort atomic.Uint32 // the next local port a UDP link tries

	dead   chan struct{} // closed by watch once the driver stopped
	diedAt time.Time     // written by watch before dead is closed
	done   chan struct{} // closed when watch returns
}

// udpSocketFunc makes the tunnel's socket in the family of the endpoint.
type udpSocketFunc func(netx.Family) (udpSocket, error)

// startTunnel brings a device up: it resolves the endpoint, makes the
// socket and configures the peer. It waits for no handshake, so it succeeds
// against a peer that does not answer: the first packet through the tunnel
// starts one (with a persistent keepalive, the keepalive the device sends
// as it comes up).
func startTunnel(ctx context.Context, s *settings, servers netx.Resolver, listen udpSocketFunc, now func() time.Time, log *slog.Logger) (*tunnel, error) {
	if len(s.local) == 0 {
		return nil, ErrNoLocalAddress
	}
	addrs, err := netx.Resolve(ctx, s.endpoint, s.endpointStrategy, servers)
	if errors.Is(err, netx.ErrNotResolved) || errors.Is(err, netx.ErrNoUsableAddress) {
		return nil, ErrEndpointNotResolved
	}
	if err != nil {
		return nil, err
	}
	to := addrs[0]
	b := newBind(func() (udpSocket, error) { return listen(netx.FamilyOf(to.Addr())) }, to, s.reserved, s.hasReserved)
	dev, tnet, err := netstack.CreateNetTUN(s.local, nil, s.mtu)
	if err != nil {
		return nil, fmt.Errorf("wireguard: creating the network stack: %w", err)
	}
	d := device.NewDevice(newQuietTUN(dev), b, deviceLogger(log))
	if err := d.IpcSet(s.uapi(to)); err != nil {
		d.Close()
		return nil, fmt.Errorf("wireguard: configuring the device: %w", err)
	}
	if err := d.Up(); err != nil {
		d.Close()
		return nil, err
	}
	t := &tunnel{
		dev:     d,
		net:     tnet,
		bind:    b,
		started: now(),
		dead:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	go t.watch(now)
	return t, nil
}

// watch waits for the driver to stop: the device closed, or its socket
// failed, in which case it closes the device.
func (t *tunnel) watch(now func() time.Time) {
	defer close(t.done)
	select {
	case <-t.dev.Wait():
		t.diedAt = now()
	case <-t.bind.failed:
		t.diedAt = now()
		t.dev.Close()
	}
	close(t.dead)
}

// alive reports whether the driver still runs.
func (t *tunnel) alive() bool {
	select {
	case <-t.dead:
		return false
	default:
		return true
	}
}

// lifetime is how long a dead tunnel ran.
func (t *tunnel) lifetime() time.Duration {
	<-t.dead
	return t.diedAt.Sub(t.started)
}

// Close stops the device and waits for its driver.
func (t *tunnel) Close() {
	t.dev.Close()
	<-t.done
}

// quietTUN is the network stack's TUN device without its start-up event:
// the tunnel brings the device up itself, once, after configuring it.
type quietTUN struct {
	tun.Device
	events chan tun.Event
	once   sync.Once
}

func newQuietTUN(d tun.Device) *quietTUN {
	return &quietTUN{Device: newOrderedTUN(d), events: make(chan tun.Event)}
}

// orderedTUN keeps a packet the device hands to the network stack from
// racing the stack's Close. Delivering a packet can make the stack answer at
// once (a reset to a closed port) on a channel that Close closes; without
// this order a packet arriving while the tunnel shuts down would send on a
// closed channel and panic the process.
type orderedTUN struct {
	tun.Device
	mu     sync.RWMutex // Write holds it shared, Close exclusively
	closed bool
}

func newOrderedTUN(d tun.Device) *orderedTUN { return &orderedTUN{Device: d} }

func (o *orderedTUN) Write(bufs [][]byte, offset int) (int, error) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	if o.closed {
		return 0, os.ErrClosed
	}
	return o.Device.Write(bufs, offset)
}

func (o *orderedTUN) Close() error {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return nil
	}
	o.closed = true
	o.mu.Unlock()
	return o.Device.Close()
}

func (q *quietTUN) Events() <-chan tun.Event { return q.events }

func (q *quietTUN) Close() error {
	err := q.Device.Close()
	q.once.Do(func() { close(q.events) })
	return err
}

// deviceLogger hands the device's own lines to the outbound's logger:
// verbose lines at debug level, errors at warn.
func deviceLogger(log *slog.Logger) *device.Logger {
	return &device.Logger{
		Verbosef: func(format string, args ...any) {
			if log.Enabled(context.Background(), slog.LevelDebug) {
				log.Debug("wireguard: " + fmt.Sprintf(format, args...))
			}
		},
		Errorf: func(format string, args ...any) {
			log.Warn("wireguard: " + fmt.Sprintf(format, args...))
		},
	}
}

// firstLinkPort is where UDP links start looking for a free local port
// inside the tunnel; they cycle through firstLinkPort..65535.
const firstLinkPort = 49152

// linkPort returns the next local port a UDP link tries.
func (t *tunnel) linkPort() uint16 {
	n := t.nextPort.Add(1) - 1
	return uint16(firstLinkPort + n%(65536-firstLinkPort))
}
