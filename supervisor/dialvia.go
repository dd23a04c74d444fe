package supervisor

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"switchyard/netx"
	"switchyard/plane"
)

// ErrNotStream: DialVia was asked for another network than TCP.
var ErrNotStream = errors.New("only tcp connections are dialed through an outbound for the process")

// DialVia opens a TCP connection to addr (host:port) for the process's
// own use (a provider or rule-set download) through the outbound,
// balancer or group tag on the plane in force: a group resolves to its
// leaf as a flow's would. The dial runs under the socket policy (the
// outbound's dialer) and the plane's establishment deadline and
// admission; the connection is guarded by its outbound version (a drain
// closes it, as it closes flows).
func (sv *Supervisor) DialVia(ctx context.Context, tag, network, addr string) (net.Conn, error) {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return nil, fmt.Errorf("%s %s: %w", network, addr, ErrNotStream)
	}
	dst, err := netx.ParseAddr(addr)
	if err != nil {
		return nil, err
	}
	p := sv.cell.Load()
	if p == nil {
		return nil, fmt.Errorf("%q: %w", tag, ErrUnknownTag)
	}
	t := p.Targets[tag]
	if t == nil {
		return nil, fmt.Errorf("%q: %w", tag, ErrUnknownTag)
	}
	f := netx.Flow{Network: netx.TCP, Dst: dst}
	q := plane.Query{Network: netx.TCP, Dst: dst}
	leaf := t.Resolve(&q)
	// The process's own dial reports to no Score attempt.
	q.Attempts.Release(time.Now())
	if leaf == nil {
		return nil, fmt.Errorf("%s: %w", tag, plane.ErrNoLeaf)
	}
	est, dctx, cancel := p.Begin(ctx)
	defer cancel()
	defer est.End()
	conn, err := leaf.DialStream(dctx, f)
	if err != nil {
		if est.Expired(dctx) {
			return nil, fmt.Errorf("%s via %s: %w", addr, leaf.ID().Tag, context.Cause(dctx))
		}
		return nil, fmt.Errorf("%s via %s: %w", addr, leaf.ID().Tag, err)
	}
	return conn, nil
}
