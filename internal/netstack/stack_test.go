package netstack

import (
	"context"
	"errors"
	"io"
	"net/netip"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/waiter"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// pump carries every packet a emits into b until a closes.
func pump(t *testing.T, a, b *Stack) {
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, 1500)
		for {
			n, err := a.ReadPacket(buf)
			if err != nil {
				done <- err
				return
			}
			b.InjectPacket(buf[:n])
		}
	}()
	t.Cleanup(func() {
		a.Close()
		if err := <-done; !errors.Is(err, os.ErrClosed) {
			t.Errorf("pump: %v", err)
		}
	})
}

// A transparent stack takes a connection to any address, and answers from
// that address; a plain one only holds its own.
func TestTransparentStackTakesEveryDestination(t *testing.T) {
	client, err := New(Options{Local: []netip.Addr{netip.MustParseAddr("10.9.0.2")}, MTU: 1500})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := New(Options{MTU: 1500, Transparent: true, TCPBuffer: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	fwd := tcp.NewForwarder(tr.Stack(), 0, 16, func(r *tcp.ForwarderRequest) {
		id := r.ID() // Complete clears the request
		var wq waiter.Queue
		ep, terr := r.CreateEndpoint(&wq)
		if terr != nil {
			r.Complete(true)
			got <- terr.String()
			return
		}
		r.Complete(false)
		c := gonet.NewTCPConn(&wq, ep)
		defer c.Close()
		c.Write([]byte(id.LocalAddress.String()))
	})
	tr.Stack().SetTransportProtocolHandler(tcp.ProtocolNumber, fwd.HandlePacket)
	pump(t, client, tr)
	pump(t, tr, client)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.DialTCP(ctx, netip.MustParseAddrPort("203.0.113.9:80"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b, err := io.ReadAll(c)
	if err != nil || string(b) != "203.0.113.9" {
		t.Fatalf("read %q, %v", b, err)
	}
	select {
	case e := <-got:
		t.Fatal(e)
	default:
	}
}
