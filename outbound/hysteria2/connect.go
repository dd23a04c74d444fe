package hysteria2

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apernet/hysteria/core/v2/client"
	coreerrs "github.com/apernet/hysteria/core/v2/errors"
	"github.com/apernet/hysteria/extras/v2/obfs"
	"github.com/apernet/quic-go"

	"switchyard/netx"
)

// conn is one authenticated connection to the server.
type conn struct {
	client client.Client
	udp    bool   // the server relays UDP
	tx     uint64 // the send rate Brutal runs at, bytes/s; 0 = BBR
	// sentinel is a UDP session that never sends: it ends exactly when the
	// connection does, which is how the slot learns of a death. nil when the
	// server relays no UDP; a death is then found by the next flow.
	sentinel    client.HyUDPConn
	noDatagrams atomic.Bool // a send found the server without QUIC datagrams

	server netip.AddrPort // the address of the server it runs to
	// episode names the connection's loss (netx.NewEpisode): every flow
	// on it that the loss ends reports that one failure. gone is errGone
	// as that shared-carrier failure (netx.FaultCarrier); retired is errGone
	// once this side closed the connection (a purge, the outbound's close:
	// netx.FaultRetired, no failure). fate is which came first: 0 while the
	// connection is up, fateLost once an end this side did not cause was
	// seen, fateRetired once Close began before that.
	episode       uint64
	gone, retired error
	fate          atomic.Int32

	done      chan struct{} // closed once the connection ended (slot.Resource)
	doneOnce  sync.Once
	watched   chan struct{} // closed when watch returns; nil without a sentinel
	closeOnce sync.Once
}

func newConn(cl client.Client, info *client.HandshakeInfo, to netip.AddrPort) *conn {
	ep := netx.NewEpisode()
	c := &conn{client: cl, udp: info.UDPEnabled, tx: info.Tx, server: to, done: make(chan struct{}),
		episode: ep, gone: netx.WithEpisode(errGone, netx.FaultCarrier, ep), retired: netx.WithFault(errGone, netx.FaultRetired)}
	if info.UDPEnabled {
		if s, err := cl.UDP(); err == nil {
			c.sentinel = s
			c.watched = make(chan struct{})
			go c.watch()
		}
	}
	return c
}

// watch waits for the connection to end, seen as the end of its sentinel
// UDP session, and tells it on done. Close ends it and waits for it.
func (c *conn) watch() {
	defer close(c.watched)
	for {
		if _, _, err := c.sentinel.Receive(); err != nil {
			break
		}
	}
	c.fate.CompareAndSwap(0, fateLost)
	c.markDone()
}

func (c *conn) markDone() { c.doneOnce.Do(func() { close(c.done) }) }

// Done is closed once the connection ended: its sentinel session ended, or
// it was closed. Without a sentinel only Close tells it, and a death is
// found by the next flow (slot.Slot.Lost).
func (c *conn) Done() <-chan struct{} { return c.done }

// dead reports whether the connection is known to have ended.
func (c *conn) dead() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// Close ends the connection and every flow on it; it closes the socket and
// waits for the sentinel's watcher.
func (c *conn) Close() {
	c.fate.CompareAndSwap(0, fateRetired)
	c.closeOnce.Do(func() {
		if c.sentinel != nil {
			c.sentinel.Close()
		}
		c.client.Close()
		c.markDone()
	})
	if c.watched != nil {
		<-c.watched
	}
}

// family is the address family of the server address c runs to.
func (c *conn) family() (netx.Family, bool) {
	if !c.server.IsValid() {
		return netx.V4, false
	}
	return netx.FamilyOf(c.server.Addr().Unmap()), true
}

// connect brings a connection up: the CA bundle is read, the server
// resolved under the address family, and each address tried in order, each
// on a socket of its own.
func (o *Outbound) connect(ctx context.Context) (*conn, error) {
	tlsConfig, err := o.clientTLS()
	if err != nil {
		return nil, err
	}
	addrs, err := netx.Resolve(ctx, o.server, o.strategy, o.resolver)
	switch {
	case errors.Is(err, netx.ErrNotResolved), errors.Is(err, netx.ErrNoUsableAddress):
		return nil, errNoUsableAddress
	case err != nil:
		return nil, fmt.Errorf("hysteria2: resolving %s: %w", o.server.Host(), err)
	}
	var fails []attemptError
	for _, a := range addrs {
		c, err := o.connectTo(ctx, a, tlsConfig)
		if err == nil {
			return c, nil
		}
		fails = append(fails, attemptError{addr: a, err: err})
		if ctx.Err() != nil {
			break
		}
	}
	return nil, &noAnswerError{attempts: fails}
}

// connectTo runs the QUIC handshake and the authentication with one address
// of the server, on a UDP socket opened under the socket policy (wrapped
// with Salamander when obfs is set). The attempt is bounded by the connect
// timeout and by ctx: either closes its socket, which ends it.
func (o *Outbound) connectTo(ctx context.Context, to netip.AddrPort, tlsConfig client.TLSConfig) (*conn, error) {
	sock, err := o.sockets.ListenUDP(ctx, netx.FamilyOf(to.Addr()))
	if err != nil {
		return nil, err
	}
	var pc net.PacketConn = sock
	if o.obfs != nil {
		if pc, err = obfs.WrapPacketConnSalamander(sock, o.obfs); err != nil {
			sock.Close()
			return nil, err
		}
	}
	timer := time.AfterFunc(o.attemptTimeout, func() { pc.Close() })
	stop := context.AfterFunc(ctx, func() { pc.Close() })
	cl, info, err := client.NewClient(&client.Config{
		ConnFactory:     socketFactory{pc},
		ServerAddr:      net.UDPAddrFromAddrPort(to),
		Auth:            o.password,
		TLSConfig:       tlsConfig,
		BandwidthConfig: o.bandwidth,
		// The stream's answer is read by DialStream itself, bounded by the
		// flow's context.
		FastOpen: true,
	})
	timerStopped, ctxStopped := timer.Stop(), stop()
	switch {
	case !ctxStopped:
		err = context.Cause(ctx)
	case !timerStopped:
		err = &timeoutError{o.attemptTimeout}
	}
	if err != nil {
		if cl != nil {
			cl.Close()
		}
		pc.Close()
		var auth coreerrs.AuthError
		if errors.As(err, &auth) {
			err = netx.WithFault(err, netx.FaultProxyAuth)
		}
		return nil, err
	}
	return newConn(cl, info, to), nil
}

// socketFactory hands the client the socket prepared for its attempt.
type socketFactory struct{ pc net.PacketConn }

func (f socketFactory) New(net.Addr) (net.PacketConn, error) { return f.pc, nil }

// timeoutError is an attempt that got no answer within the connect timeout.
type timeoutError struct{ d time.Duration }

func (e *timeoutError) Error() string   { return fmt.Sprintf("no answer within %s", e.d) }
func (e *timeoutError) Timeout() bool   { return true }
func (e *timeoutError) Temporary() bool { return true }

// The fates of a connection (conn.fate).
const (
	fateLost    = 1
	fateRetired = 2
)

// lost is the error of a link whose connection ended: the shared carrier's
// failure, or its retirement when this side had closed it first.
func (c *conn) lost() error {
	c.fate.CompareAndSwap(0, fateLost)
	if c.fate.Load() == fateRetired {
		return c.retired
	}
	return c.gone
}

// carrier marks err, a stream's failure, with the connection's loss when
// it is one (connectionGone): the same episode for every stream, or a
// retirement when this side closed the connection.
func (c *conn) carrier(err error) error {
	if err == nil || !connectionGone(err) {
		return err
	}
	c.fate.CompareAndSwap(0, fateLost)
	if c.fate.Load() == fateRetired {
		return netx.WithFault(err, netx.FaultRetired)
	}
	return netx.WithEpisode(err, netx.FaultCarrier, c.episode)
}

// connectionGone reports whether err says the QUIC connection itself ended
// (as opposed to one stream or one request failing).
func connectionGone(err error) bool {
	var (
		closed    coreerrs.ClosedError
		app       *quic.ApplicationError
		transport *quic.TransportError
		idle      *quic.IdleTimeoutError
		reset     *quic.StatelessResetError
	)
	if errors.As(err, &closed) && closed.Err == nil {
		return true
	}
	return errors.As(err, &app) || errors.As(err, &transport) || errors.As(err, &idle) ||
		errors.As(err, &reset) || errors.Is(err, quic.ErrTransportClosed)
}
