package plane_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"switchyard/balancer"
	"switchyard/netx"
	"switchyard/outbound"
	"switchyard/plane"
)

// pipeOutbound hands out one end of a net.Pipe per stream and keeps the other.
type pipeOutbound struct{ peers chan net.Conn }

func (o *pipeOutbound) DialStream(context.Context, netx.Flow) (net.Conn, error) {
	mine, theirs := net.Pipe()
	o.peers <- theirs
	return mine, nil
}

func (o *pipeOutbound) DialPacket(context.Context, netx.Flow) (netx.PacketLink, error) {
	return nil, &outbound.NoUDPError{What: "pipe"}
}

// roundTrip writes p on peer and reads it back on c.
func roundTrip(c, peer net.Conn, p string) error {
	c.SetDeadline(time.Now().Add(2 * time.Second))
	peer.SetDeadline(time.Now().Add(2 * time.Second))
	go peer.Write([]byte(p))
	buf := make([]byte, len(p))
	n, err := c.Read(buf)
	if err != nil {
		return err
	}
	if string(buf[:n]) != p {
		return errors.New("read " + string(buf[:n]))
	}
	return nil
}

func TestABalancedStreamIsClosedByItsMembersDrainNotTheBalancers(t *testing.T) {
	out := &pipeOutbound{peers: make(chan net.Conn, 1)}
	member := plane.NewTarget(plane.OutboundID{Tag: "up", Version: 1}, out)
	bal, err := balancer.New("pool", []balancer.Member{{
		Target: member,
		Probe:  netx.Addr{IP: netip.MustParseAddr("192.0.2.1"), Port: 443},
	}}, balancer.RoundRobin, nil)
	if err != nil {
		t.Fatal(err)
	}
	pool := plane.NewChooserTarget(plane.OutboundID{Tag: "pool", Version: 1}, bal)

	flow := netx.Flow{Network: netx.TCP, Dst: netx.DomainAddr("example.com", 443)}
	c, err := pool.DialStream(context.Background(), flow)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	peer := <-out.peers
	defer peer.Close()
	if member.Flows() != 1 || pool.Flows() != 0 {
		t.Fatalf("the stream is filed under the balancer: member %d flows, balancer %d", member.Flows(), pool.Flows())
	}

	pool.CloseFlows()
	if err := roundTrip(c, peer, "still open"); err != nil {
		t.Fatalf("closing the balancer's flows ended a balanced stream: %v", err)
	}

	member.CloseFlows()
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, plane.ErrDrained) {
		t.Fatalf("after the member's drain, read = %v, want %v", err, plane.ErrDrained)
	}
}
