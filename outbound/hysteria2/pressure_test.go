package hysteria2

import (
	"context"
	"testing"

	"switchyard/internal/pressure"
	"switchyard/netx"
)

// Every UDP message a session sends is at least one QUIC DATAGRAM frame:
// the counters count them, so a datagram-only flow qualifies an interval
// with 32 frames.
func TestCarrierCountersCountDatagrams(t *testing.T) {
	srv := startServer(t, serverOptions{})
	o := newHarness(t).outbound(testSpec(srv.addr, srv.cert))
	l, err := o.DialPacket(context.Background(), netx.Flow{Network: netx.UDP})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	peer := udpEcho(t, "")
	before, ok := o.CarrierCounters()
	if !ok {
		t.Fatal("no counters with a connection up")
	}
	for range pressure.MinDatagrams {
		if err := l.WritePacket([]byte("ping"), peer); err != nil {
			t.Fatal(err)
		}
	}
	var after pressure.Counters
	waitFor(t, "the datagrams to be sent", func() bool {
		after, _ = o.CarrierCounters()
		return after.Transmissions > before.Transmissions
	})
	if got := after.Datagrams - before.Datagrams; got != pressure.MinDatagrams {
		t.Fatalf("%d datagrams counted, want %d", got, pressure.MinDatagrams)
	}
	if after.Carrier != before.Carrier {
		t.Fatalf("before %+v after %+v", before, after)
	}
}

// The loss meter wraps the controller core/v2 installed: after a connect
// the connection's controller is the meter, around BBR (the extended
// congestion event kept) when no bandwidth is configured.
func TestLossMeterWrapsTheInstalledController(t *testing.T) {
	srv := startServer(t, serverOptions{})
	o := newHarness(t).outbound(testSpec(srv.addr, srv.cert))
	dialEcho(t, o, tcpEcho(t))
	r, ok := o.slot.Current()
	if !ok {
		t.Fatal("no connection")
	}
	if r.V.loss == nil {
		t.Fatal("no loss meter on the connection")
	}
	if r.V.loss.ackedPackets.Load() == 0 || r.V.loss.ackedBytes.Load() == 0 {
		t.Fatal("the meter saw no acknowledgement of a connection that carried an echo")
	}
	cc := installedController(quicConnOf(r.V.client))
	ex, ok := cc.(*lossMeterEx)
	if !ok || ex.lossMeter != r.V.loss {
		t.Fatalf("the installed controller is %T, not the connection's meter", cc)
	}
}
