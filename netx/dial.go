package netx

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"
)

// DefaultConnectTimeout bounds one TCP connect attempt.
const DefaultConnectTimeout = 10 * time.Second

// Dialer opens sockets under a socket policy.
type Dialer struct {
	Policy         SocketPolicy
	ConnectTimeout time.Duration // one attempt; 0 = DefaultConnectTimeout
	// Gate, when set, is the process's dial admission gate, for the
	// connects a component makes on its own, outside any flow's
	// establishment (a connection pool's replacements). A flow's dials
	// are admitted by their establishment.
	Gate *Gate
	// Carriers, when set, is handed every socket Connect opens: a proxy
	// runtime's own copy of the dialer names the set its carrier-pressure
	// sampling reads (carrier.go). Direct dialing leaves it unset: a
	// socket to the destination itself is no carrier.
	Carriers CarrierSink
}

// NewDialer returns a dialer under p.
func NewDialer(p SocketPolicy, connectTimeout time.Duration) *Dialer {
	return &Dialer{Policy: p, ConnectTimeout: connectTimeout}
}

func (d *Dialer) timeout() time.Duration {
	if d.ConnectTimeout > 0 {
		return d.ConnectTimeout
	}
	return DefaultConnectTimeout
}

// Connect opens one TCP connection to addr, bounded by the connect timeout.
// Under an establishment it is a physical connect: it takes the dial's
// admission permit first (see Admit).
func (d *Dialer) Connect(ctx context.Context, addr netip.AddrPort) (*net.TCPConn, error) {
	if err := Admit(ctx); err != nil {
		return nil, err
	}
	Mark(ctx, PhaseConnect)
	addr = netip.AddrPortFrom(addr.Addr().Unmap(), addr.Port())
	v4 := addr.Addr().Is4()
	nd := net.Dialer{
		Timeout:   d.timeout(),
		Control:   d.Policy.Control,
		KeepAlive: -1,
	}
	if idle := d.Policy.TCPKeepAliveIdle; idle > 0 {
		nd.KeepAliveConfig = net.KeepAliveConfig{Enable: true, Idle: idle, Interval: -1, Count: -1}
		nd.KeepAlive = idle
	}
	if b := d.Policy.bindFor(v4); b.IsValid() {
		nd.LocalAddr = &net.TCPAddr{IP: b.AsSlice()}
	}
	network := "tcp6"
	if v4 {
		network = "tcp4"
	}
	c, err := nd.DialContext(ctx, network, addr.String())
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
			return nil, &timeoutError{addr: addr, err: err}
		}
		return nil, err
	}
	tc := c.(*net.TCPConn)
	if d.Carriers != nil {
		d.Carriers.AddCarrier(tc)
	}
	return tc, nil
}

// ConnectAny tries addrs in order, one at a time (not Happy Eyeballs: every
// failure is kept so its cause is not lost), and returns the first that
// connects. The error lists each address with its own error.
func (d *Dialer) ConnectAny(ctx context.Context, addrs []netip.AddrPort) (*net.TCPConn, error) {
	if len(addrs) == 0 {
		return nil, ErrNotResolved
	}
	var fails []attemptError
	for _, a := range addrs {
		c, err := d.Connect(ctx, a)
		if err == nil {
			return c, nil
		}
		fails = append(fails, attemptError{addr: a, err: err})
		if ctx.Err() != nil {
			break
		}
	}
	return nil, &ConnectError{attempts: fails}
}

type attemptError struct {
	addr netip.AddrPort
	err  error
}

// ConnectError is the failure of every attempt of ConnectAny.
type ConnectError struct{ attempts []attemptError }

func (e *ConnectError) Error() string {
	parts := make([]string, len(e.attempts))
	for i, a := range e.attempts {
		parts[i] = fmt.Sprintf("%s: %v", a.addr, a.err)
	}
	return "failed to connect to any address (" + strings.Join(parts, "; ") + ")"
}

// Unwrap exposes each attempt's error, so errors.Is finds a refusal or an
// unreachable network among them.
func (e *ConnectError) Unwrap() []error {
	errs := make([]error, len(e.attempts))
	for i, a := range e.attempts {
		errs[i] = a.err
	}
	return errs
}

type timeoutError struct {
	addr netip.AddrPort
	err  error
}

func (e *timeoutError) Error() string   { return fmt.Sprintf("connect to %s timed out", e.addr) }
func (e *timeoutError) Unwrap() error   { return e.err }
func (e *timeoutError) Timeout() bool   { return true }
func (e *timeoutError) Temporary() bool { return true }

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
