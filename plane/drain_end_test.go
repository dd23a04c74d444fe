package plane_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"switchyard/netx"
	"switchyard/outbound"
	"switchyard/plane"
	"switchyard/relay"
)

// loopbackOut dials one loopback TCP connection to a server of its own.
type loopbackOut struct{ ln *net.TCPListener }

func (o loopbackOut) DialStream(ctx context.Context, _ netx.Flow) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", o.ln.Addr().String())
}

func (loopbackOut) DialPacket(context.Context, netx.Flow) (netx.PacketLink, error) {
	return nil, errors.New("no")
}

// A flow whose outbound version is drained ends, to the relay carrying it,
// as its owner's stop, not as a failure of the upstream: ErrDrained is a
// close.
func TestADrainedFlowEndsAsAStop(t *testing.T) {
	if !errors.Is(plane.ErrDrained, net.ErrClosed) {
		t.Fatal("ErrDrained does not match net.ErrClosed")
	}
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	tgt := plane.NewTarget(plane.OutboundID{Tag: "up", Version: 1}, loopbackOut{ln})
	up, err := tgt.DialStream(context.Background(), netx.Flow{})
	if err != nil {
		t.Fatal(err)
	}
	client, inbound := net.Pipe() // a userspace copy from the client's side
	defer client.Close()
	done := make(chan relay.Result, 1)
	go func() { done <- relay.Pipe(context.Background(), inbound, up, time.Minute) }()
	time.Sleep(20 * time.Millisecond)
	tgt.CloseFlows()
	select {
	case res := <-done:
		if e := res.End; e.By != relay.EndStop || e.Failure {
			t.Fatalf("end %v (failure %v, error %v), want a stop", e.By, e.Failure, e.Err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the drained flow did not end")
	}
}

// noUDPOut carries no datagrams, and says so.
type noUDPOut struct{ loopbackOut }

func (noUDPOut) CarriesUDP() bool { return false }

// A target passes on what its outbound carries.
func TestATargetPassesOnWhatItsOutboundCarries(t *testing.T) {
	id := plane.OutboundID{Tag: "up", Version: 1}
	if !plane.NewTarget(id, loopbackOut{}).CarriesUDP() {
		t.Fatal("an outbound stating nothing was taken to carry no UDP")
	}
	if plane.NewTarget(id, noUDPOut{}).CarriesUDP() {
		t.Fatal("a TCP-only outbound's target carries UDP")
	}
	if !outbound.CarriesUDP(plane.NewChooserTarget(id, nil)) {
		t.Fatal("a chooser target carries no UDP")
	}
}
