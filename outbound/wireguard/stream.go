package wireguard

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"

	"switchyard/netx"
)

// connectAttemptTimeout bounds one TCP connect inside the tunnel, per
// resolved address.
const connectAttemptTimeout = 10 * time.Second

// errConnectTimedOut is one address's failure to answer within the bound.
var errConnectTimedOut = errors.New("connect timed out")

// connectError is the failure of every TCP connect inside the tunnel.
type connectError struct {
	attempts []attempt
}

type attempt struct {
	ip  netip.Addr
	err error
}

func (e *connectError) Error() string {
	var b strings.Builder
	b.WriteString("wireguard: tunnel TCP connect failed for all resolved addresses (")
	for i, a := range e.attempts {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(a.ip.String() + ": " + a.err.Error())
	}
	b.WriteString(")")
	return b.String()
}

// Fault is netx.FaultTargetRefused when an address refused the connect:
// the refusal came back through the tunnel, so the tunnel works and the
// target said no. Timeouts alone do not tell a silent target from a dead
// tunnel and leave the failure unclassified (the node's, conservatively).
func (e *connectError) Fault() (netx.Fault, uint64) {
	for _, a := range e.attempts {
		if refusedInTunnel(a.err) {
			return netx.FaultTargetRefused, 0
		}
	}
	return netx.FaultNone, 0
}

// refusedInTunnel reports whether err is the stack's refused connect. The
// gVisor adapter turns its tcpip error into an error of its text alone,
// with no sentinel; the text is tcpip.ErrConnectionRefused's, from the
// pinned version.
func refusedInTunnel(err error) bool {
	return err != nil && strings.HasSuffix(err.Error(), "connection was refused")
}

// Unwrap exposes each attempt's error.
func (e *connectError) Unwrap() []error {
	errs := make([]error, len(e.attempts))
	for i, a := range e.attempts {
		errs[i] = a.err
	}
	return errs
}

// connect tries addrs in order, one at a time, each bounded by timeout, and
// returns the first connection that completes.
func connect(ctx context.Context, t *tunnel, addrs []netip.AddrPort, timeout time.Duration) (*gonet.TCPConn, error) {
	e := &connectError{}
	for _, a := range addrs {
		actx, cancel := context.WithTimeout(ctx, timeout)
		c, err := t.stack.dialTCP(actx, a)
		cancel()
		if err == nil {
			return c, nil
		}
		var oe *net.OpError
		switch {
		case ctx.Err() != nil:
			err = ctx.Err()
		case errors.Is(err, context.DeadlineExceeded):
			err = errConnectTimedOut
		case errors.As(err, &oe):
			err = oe.Err // the address is already named
		}
		e.attempts = append(e.attempts, attempt{ip: a.Addr(), err: err})
		if ctx.Err() != nil {
			break
		}
	}
	return nil, e
}

// heldConn is a TCP flow inside the tunnel with its hold on the tunnel's
// slot: closing it gives the hold back, once, so that a drained tunnel
// closes after its last flow.
type heldConn struct {
	*gonet.TCPConn
	t       *tunnel
	once    sync.Once
	release func()
}

// Read reads the flow; a failure carries what the tunnel's state says of
// it (tunnel.flowErr).
func (c *heldConn) Read(p []byte) (int, error) {
	n, err := c.TCPConn.Read(p)
	return n, c.t.flowErr(err)
}

// Write writes the flow, its failure marked as Read's.
func (c *heldConn) Write(p []byte) (int, error) {
	n, err := c.TCPConn.Write(p)
	return n, c.t.flowErr(err)
}

func (c *heldConn) Close() error {
	err := c.TCPConn.Close()
	c.once.Do(c.release)
	return err
}
