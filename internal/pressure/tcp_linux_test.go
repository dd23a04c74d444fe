package pressure_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"switchyard/internal/pressure"
	"switchyard/internal/pressure/pressuretest"
	"switchyard/netx"
	"switchyard/test/netem/netlab"
)

// A real TCP connection through a namespace whose link first adds a
// baseline delay, then more delay, then loss, then nothing: the TCP_INFO
// of the socket the dialer connected (handed over by netx.Dialer.Carriers)
// trains the baseline, fires an RTT hint after three pressured intervals,
// holds the loss episode until 30 s after it and publishes it then, and
// rearms after normal intervals.
func TestTCPInfoEpisodesOnARealConnection(t *testing.T) {
	t.Parallel()
	p, err := netlab.New(pressuretest.DefaultPlan.Base)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	t.Logf("link: %s", p.Mode)
	sink, err := p.StartSink()
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()

	carriers := pressure.NewTCPCarriers(0)
	d := &netx.Dialer{Carriers: carriers}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := d.Connect(ctx, netip.MustParseAddrPort(sink.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if carriers.Len() != 1 {
		t.Fatalf("the dialer handed over %d sockets, want 1", carriers.Len())
	}
	stop := pressuretest.Upload(c)
	defer stop()
	pressuretest.Run(t, p, carriers, pressuretest.DefaultPlan)

	// A closed socket leaves the set at the next sampling.
	stop()
	c.Close()
	carriers.Sample(time.Now())
	if carriers.Len() != 0 {
		t.Fatalf("%d sockets kept after close", carriers.Len())
	}
}
