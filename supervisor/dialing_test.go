package supervisor

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"switchyard/netx"
	"switchyard/spec"
)

// A dial in progress is in the tracker's table from its start (waiting for
// admission included) until it ends, with what it was routed to; once it
// succeeds its flow takes its place.
func TestDialsInProgressAreTracked(t *testing.T) {
	srv := newSlowSocks(t, 500*time.Millisecond)
	s := baseSpec()
	s.Dial.MaxConcurrentDials = 4
	s.Outbounds = append(s.Outbounds, spec.Outbound{Tag: "up", Type: "socks", Server: srv.ln.Addr().String(), AddressFamily: "auto"})
	s.Route.Final = "up"
	sv, _ := run(t, s, Options{Gate: netx.NewGate(64)})
	flow := netx.Flow{Network: netx.TCP, Dst: netx.DomainAddr("dst.test", 80), Inbound: "socks-in"}
	const n = 10
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := sv.conn.ConnectStream(context.Background(), flow)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}()
	}
	deadline := time.Now().Add(5 * time.Second)
	for sv.Tracker().DialsInProgress() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d dials in progress listed, want %d", sv.Tracker().DialsInProgress(), n)
		}
		time.Sleep(time.Millisecond)
	}
	if got := len(sv.Tracker().Flows()); got != 0 {
		t.Fatalf("%d flows while every dial is in progress", got)
	}
	for _, d := range sv.Tracker().Dials() {
		if d.Outbound != "up@v1" || d.Inbound != "socks-in" || d.Destination != flow.Dst || d.Rule != "final" {
			t.Fatalf("dial listed as %+v", d)
		}
	}
	wg.Wait()
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	if got := sv.Tracker().DialsInProgress(); got != 0 {
		t.Fatalf("%d dials still listed after they ended", got)
	}
	if got := len(sv.Tracker().Flows()); got != n {
		t.Fatalf("%d flows after %d dials succeeded", got, n)
	}
}
