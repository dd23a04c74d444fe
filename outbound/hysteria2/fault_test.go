package hysteria2

import (
	"context"
	"testing"
	"time"

	"switchyard/netx"
)

// The connection's loss is one shared-carrier failure: every link on it
// fails with the same episode.
func TestTheConnectionsLossIsOneCarrierEpisode(t *testing.T) {
	srv := startCloser(t, 0)
	o := newHarness(t).outbound(testSpec(srv.addr, srv.cert))
	a, b := dialLink(t, o), dialLink(t, o)
	errs := make(chan error, 2)
	for _, l := range []netx.PacketLink{a, b} {
		go func() {
			_, _, err := l.ReadPacket(make([]byte, 2048))
			errs <- err
		}()
	}
	srv.closeAll()
	var eps []uint64
	for range 2 {
		select {
		case err := <-errs:
			f, ep := netx.FaultOf(err)
			if f != netx.FaultCarrier || ep == 0 {
				t.Fatalf("a link of a lost connection failed with %v (fault %v, episode %d)", err, f, ep)
			}
			eps = append(eps, ep)
		case <-time.After(5 * time.Second):
			t.Fatal("ReadPacket still blocked after the connection ended")
		}
	}
	if eps[0] != eps[1] {
		t.Fatalf("two links of one connection report episodes %d and %d", eps[0], eps[1])
	}
	// Until the next attempt, a flow fails with the shared dial's backoff.
	_, err := o.DialPacket(context.Background(), netx.Flow{Network: netx.UDP})
	if f, _ := netx.FaultOf(err); f != netx.FaultSharedDial {
		t.Fatalf("a dial after the loss: %v (fault %v)", err, f)
	}
}

// A connection this side closed retires its links: no failure.
func TestAClosedConnectionRetiresItsLinks(t *testing.T) {
	srv := startServer(t, serverOptions{})
	o := newHarness(t).outbound(testSpec(srv.addr, srv.cert))
	l, err := o.DialPacket(context.Background(), netx.Flow{Network: netx.UDP})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	o.Close()
	_, _, err = l.ReadPacket(make([]byte, 64))
	if f, _ := netx.FaultOf(err); f != netx.FaultRetired {
		t.Fatalf("a link's read after Close: %v (fault %v)", err, f)
	}
}
