package direct

import (
	"context"
	"net"
	"testing"

	"switchyard/netx"
)

// A direct dial's failures are the target's: a refused connect is the
// target refusing, a name that does not resolve its path failing.
func TestDialFailuresAreTheTargets(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := netx.AddrFromAddrPort(ln.Addr().(*net.TCPAddr).AddrPort())
	ln.Close()
	o := newDirect(netx.Auto, nil, nil)
	_, err = o.DialStream(context.Background(), netx.Flow{Dst: closed})
	if f, _ := netx.FaultOf(err); f != netx.FaultTargetRefused {
		t.Fatalf("refused connect: %v (fault %v)", err, f)
	}
	o = newDirect(netx.IPv6Only, nil, nil)
	_, err = o.DialStream(context.Background(), netx.Flow{Dst: netx.DomainAddr("echo.test", 1)})
	if f, _ := netx.FaultOf(err); f != netx.FaultTargetPath {
		t.Fatalf("unusable name: %v (fault %v)", err, f)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = o.DialStream(ctx, netx.Flow{Dst: closed})
	if f, _ := netx.FaultOf(err); f != netx.FaultNone {
		t.Fatalf("cancelled dial: %v (fault %v)", err, f)
	}
}
