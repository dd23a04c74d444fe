package wireguard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.zx2c4.com/wireguard/device"

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
	dev   *device.Device
	stack *stackDevice
	bind  *bind
	// up is when it started by the wall clock, the device's own clock for
	// its handshakes.
	up time.Time

	nextPort atomic.Uint32 // the next local port a UDP link tries

	dead chan struct{} // closed by watch once the driver stopped
	done chan struct{} // closed when watch returns

	// closing is set once Close began: the flows that end then were
	// retired here. episode names the tunnel's own death otherwise (its
	// socket failed): one shared-source failure for every flow in it.
	closing atomic.Bool
	episode uint64
}

// flowErr marks err, a failure of a flow inside the tunnel, with what the
// tunnel's state says of it: retired when this side is closing the
// tunnel, the tunnel's shared-source failure when its driver stopped on
// its own, and as it is otherwise.
func (t *tunnel) flowErr(err error) error {
	if err == nil || err == io.EOF {
		return err
	}
	if t.closing.Load() {
		return netx.WithFault(err, netx.FaultRetired)
	}
	select {
	case <-t.dead:
		return netx.WithEpisode(err, netx.FaultSharedSource, t.episode)
	default:
		return err
	}
}

// udpSocketFunc makes the tunnel's socket in the family of the endpoint.
type udpSocketFunc func(netx.Family) (udpSocket, error)

// startTunnel brings a device up: it resolves the endpoint, makes the
// socket and configures the peer. It waits for no handshake, so it succeeds
// against a peer that does not answer: the first packet through the tunnel
// starts one (with a persistent keepalive, the keepalive the device sends
// as it comes up).
func startTunnel(ctx context.Context, s *settings, servers netx.Resolver, listen udpSocketFunc, log *slog.Logger) (*tunnel, error) {
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
	st, err := newStackDevice(s.local, s.mtu)
	if err != nil {
		return nil, fmt.Errorf("wireguard: creating the network stack: %w", err)
	}
	d := device.NewDevice(st, b, deviceLogger(log))
	if err := d.IpcSet(s.uapi(to)); err != nil {
		d.Close()
		return nil, fmt.Errorf("wireguard: configuring the device: %w", err)
	}
	if err := d.Up(); err != nil {
		d.Close()
		return nil, err
	}
	st.up() // the device is up already: the event changes nothing
	t := &tunnel{
		dev:   d,
		stack: st,
		bind:  b,
		up:    time.Now(),
		dead:  make(chan struct{}),
		done:  make(chan struct{}),

		episode: netx.NewEpisode(),
	}
	go t.watch()
	return t, nil
}

// watch waits for the driver to stop: the device closed, or its socket
// failed, in which case it closes the device.
func (t *tunnel) watch() {
	defer close(t.done)
	select {
	case <-t.dev.Wait():
	case <-t.bind.failed:
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

// lastHandshake is when the peer last completed a handshake with the
// device, by the wall clock; zero when it never did.
func (t *tunnel) lastHandshake() time.Time { return lastHandshake(t.dev) }

// lastHandshake is when d's peer last completed a handshake, read from its
// state; zero when it never did.
func lastHandshake(d *device.Device) time.Time {
	state, err := d.IpcGet()
	if err != nil {
		return time.Time{}
	}
	var sec, nsec int64
	for line := range strings.Lines(state) {
		line = strings.TrimSuffix(line, "\n")
		if v, ok := strings.CutPrefix(line, "last_handshake_time_sec="); ok {
			sec, _ = strconv.ParseInt(v, 10, 64)
		} else if v, ok := strings.CutPrefix(line, "last_handshake_time_nsec="); ok {
			nsec, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	if sec == 0 && nsec == 0 {
		return time.Time{}
	}
	return time.Unix(sec, nsec)
}

// silentFor is how long the peer has answered no handshake at now: since
// its last one, or since the tunnel started when it never answered.
func (t *tunnel) silentFor(now time.Time) time.Duration {
	return now.Sub(later(t.lastHandshake(), t.up))
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Close stops the device and waits for its driver.
func (t *tunnel) Close() {
	t.closing.Store(true)
	t.dev.Close()
	<-t.done
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
