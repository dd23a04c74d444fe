package plane_test

import (
	"context"
	"errors"
	"net"
	"testing"

	"switchyard/netx"
	"switchyard/plane"
)

// pollOut's packet links are DualUDP sockets a Poller can read, as the
// direct outbound's are.
type pollOut struct{}

func (pollOut) DialStream(context.Context, netx.Flow) (net.Conn, error) {
	return nil, errors.New("no streams")
}

func (pollOut) DialPacket(ctx context.Context, _ netx.Flow) (netx.PacketLink, error) {
	u, err := netx.NewDialer(netx.SocketPolicy{}, 0).BindDual(ctx, []netx.Family{netx.V4}, nil)
	if err != nil {
		return nil, err
	}
	return pollLink{u}, nil
}

type pollLink struct{ u *netx.DualUDP }

func (l pollLink) WritePacket(p []byte, to netx.Addr) error {
	ap, _ := to.AddrPort()
	return l.u.WriteTo(p, ap)
}
func (l pollLink) ReadPacket(p []byte) (int, netx.Addr, error) {
	n, from, err := l.u.ReadFrom(p)
	return n, netx.AddrFromAddrPort(from), err
}
func (l pollLink) Close() error                                { return l.u.Close() }
func (l pollLink) PollSources(closed func()) []netx.PollSource { return l.u.PollSources(closed) }

// A guarded link hands on its poll sources, and its close hook fires on a
// drain; a polled read then fails with ErrDrained, as ReadPacket does.
func TestAPolledLinkReportsItsDrain(t *testing.T) {
	tgt := plane.NewTarget(plane.OutboundID{Tag: "direct", Version: 1}, pollOut{})
	l, err := tgt.DialPacket(context.Background(), netx.Flow{Network: netx.UDP})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	closed := make(chan struct{}, 1)
	srcs := netx.PollSourcesOf(l, func() { closed <- struct{}{} })
	if len(srcs) != 1 {
		t.Fatalf("%d poll sources, want the socket's", len(srcs))
	}
	buf := make([]byte, 64)
	if _, _, err := srcs[0].Read(buf); err != netx.ErrWouldBlock {
		t.Fatalf("nothing waiting: %v", err)
	}
	tgt.CloseFlows()
	select {
	case <-closed:
	default:
		t.Fatal("the drain closed the link without telling its poller")
	}
	if _, _, err := srcs[0].Read(buf); !errors.Is(err, plane.ErrDrained) {
		t.Fatalf("a polled read after the drain: %v, want ErrDrained", err)
	}
}
