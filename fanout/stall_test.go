package fanout_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/fanout"
	"switchyard/netx"
	"switchyard/outbound"
	"switchyard/outbound/direct"
	"switchyard/outbound/socks"
	"switchyard/spec"
)

// silentServer accepts TCP connections and never answers, as a proxy server
// that hangs does. It holds every connection until the client closes it.
type silentServer struct {
	addr     string
	accepted atomic.Int32
	open     atomic.Int32 // connections the client has not closed
}

func newSilentServer(t *testing.T) *silentServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &silentServer{addr: ln.Addr().String()}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.accepted.Add(1)
			s.open.Add(1)
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				defer s.open.Add(-1)
				b := make([]byte, 512)
				for {
					if _, err := c.Read(b); err != nil {
						return
					}
				}
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return s
}

// hangingResolver never answers: each lookup waits for its context.
type hangingResolver struct {
	lookups  atomic.Int32
	inFlight atomic.Int32
}

func (r *hangingResolver) LookupIP(ctx context.Context, host string) ([]netip.Addr, error) {
	r.lookups.Add(1)
	r.inFlight.Add(1)
	defer r.inFlight.Add(-1)
	<-ctx.Done()
	return nil, ctx.Err()
}

// One association sends to a silent outbound, to a SOCKS5 proxy that accepts
// and never answers, and to a name direct cannot resolve, interleaved with
// packets to a healthy peer: the healthy peer answers every packet, as it
// does when sent to alone, while all three dead targets are still stuck, and
// the dead targets cost one open or lookup each, however many packets go to
// them.
func TestDeadTargetsDoNotStallTheAssociation(t *testing.T) {
	healthy := newEcho(t)
	server := newSilentServer(t)
	dialer := netx.NewDialer(netx.SocketPolicy{}, time.Second)
	proxy, err := socks.New(spec.Outbound{Tag: "proxy", Type: "socks", Server: server.addr, UDP: true},
		outbound.Deps{Dialer: dialer, Servers: netx.SystemResolver{}})
	if err != nil {
		t.Fatal(err)
	}
	names := &hangingResolver{}
	free := direct.New(netx.Auto, outbound.Deps{Dialer: dialer, Destinations: names})
	silent := newSilent()
	a := newAssoc(t, planeOf(t, 1, target("direct", 1, free),
		byPort{7001, target("silent", 1, silent)},
		byPort{7002, target("proxy", 1, proxy)}))
	dead := []netx.Addr{
		netx.DomainAddr("quic.example", 7001),
		netx.DomainAddr("proxied.example", 7002),
		netx.DomainAddr("unresolvable.example", healthy.addr.Port),
	}

	const packets = 100
	// The healthy peer alone: the first packet opens direct's sub-link (a
	// burst while it opens would overflow its queue), then a burst.
	a.send(t, "warm up", healthy.addr)
	a.reply(t)
	for i := range packets {
		a.send(t, fmt.Sprint("alone ", i), healthy.addr)
	}
	for i := range packets {
		if d := a.reply(t); d.payload != fmt.Sprint("alone ", i) {
			t.Fatalf("reply %d sent alone is %q", i, d.payload)
		}
	}

	sent := make(chan error, 1)
	go func() {
		for i := range packets {
			for _, to := range dead {
				if err := a.WritePacket([]byte("to the dead"), to); err != nil {
					sent <- err
					return
				}
			}
			if err := a.WritePacket(fmt.Appendf(nil, "healthy %d", i), healthy.addr); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	// The dead targets stay stuck for far longer than this (an open is
	// bounded by 40 s, a lookup by 5 s): the bound only keeps a stalled
	// association from hanging the test.
	timeout := time.After(4 * time.Second)
	got := map[string]bool{}
	for len(got) < packets {
		select {
		case d := <-a.replies:
			if d.from != healthy.addr {
				t.Fatalf("a reply %q from %v", d.payload, d.from)
			}
			got[d.payload] = true
		case <-timeout:
			t.Fatalf("%d of %d replies from the healthy peer while the dead targets were stuck", len(got), packets)
		}
	}
	select {
	case err := <-sent:
		if err != nil {
			t.Fatal(err)
		}
	case <-timeout:
		t.Fatal("the sends did not return")
	}

	// Every dead target is still stuck: the replies did not wait for any.
	// The opens and the lookup run on goroutines of their own, which may
	// only now be getting to their peers.
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end) &&
		(silent.inFlight.Load() == 0 || names.inFlight.Load() == 0 || server.open.Load() == 0); {
		time.Sleep(5 * time.Millisecond)
	}
	if silent.inFlight.Load() != 1 || names.inFlight.Load() != 1 || server.open.Load() != 1 {
		t.Fatalf("in flight: %d silent opens, %d lookups, %d proxy connections; want 1 each",
			silent.inFlight.Load(), names.inFlight.Load(), server.open.Load())
	}
	if silent.dials.Load() != 1 || server.accepted.Load() != 1 || names.lookups.Load() != 1 {
		t.Fatalf("%d silent opens, %d proxy connections, %d lookups for %d packets each; want 1 each",
			silent.dials.Load(), server.accepted.Load(), names.lookups.Load(), packets)
	}
	// The two opening sub-links each hold a full queue and dropped the rest;
	// the direct link holds and drops the packets to the name itself.
	if n, want := a.Dropped(), uint64(2*(packets-fanout.MaxQueued)); n != want {
		t.Fatalf("%d packets dropped, want %d", n, want)
	}
	if n := healthy.received.Load(); n != 1+2*packets {
		t.Fatalf("the healthy peer received %d packets, want %d", n, 1+2*packets)
	}
}
