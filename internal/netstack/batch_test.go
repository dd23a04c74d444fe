package netstack

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net/netip"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/waiter"
)

// A bulk TCP transfer injected in batches reaches a transparent stack
// whole and in order, its segments coalesced: the stack receives fewer IP
// packets than were injected.
func TestInjectBatchCoalescesSegments(t *testing.T) {
	client, err := New(Options{Local: []netip.Addr{netip.MustParseAddr("10.9.0.2")}, MTU: 1500})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := New(Options{MTU: 1500, Transparent: true, TCPBuffer: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 4<<20)
	rand.Read(want)
	got := make(chan []byte, 1)
	fwd := tcp.NewForwarder(tr.Stack(), 0, 16, func(r *tcp.ForwarderRequest) {
		var wq waiter.Queue
		ep, terr := r.CreateEndpoint(&wq)
		if terr != nil {
			r.Complete(true)
			got <- nil
			return
		}
		r.Complete(false)
		c := gonet.NewTCPConn(&wq, ep)
		defer c.Close()
		b, _ := io.ReadAll(c)
		got <- b
	})
	tr.Stack().SetTransportProtocolHandler(tcp.ProtocolNumber, fwd.HandlePacket)
	var injected atomic.Int64
	done := make(chan error, 1)
	go func() { // the client's packets, in batches of what is queued
		bufs, sizes := make([][]byte, 32), make([]int, 32)
		for i := range bufs {
			bufs[i] = make([]byte, 1500)
		}
		ps := make([][]byte, 32)
		for {
			n, err := client.ReadPackets(bufs, sizes, 0)
			if err != nil {
				done <- err
				return
			}
			for i := range n {
				ps[i] = bufs[i][:sizes[i]]
			}
			injected.Add(int64(n))
			tr.InjectBatch(ps[:n])
		}
	}()
	pump(t, tr, client)
	t.Cleanup(func() {
		client.Close()
		if err := <-done; !errors.Is(err, os.ErrClosed) {
			t.Errorf("batch pump: %v", err)
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.DialTCP(ctx, netip.MustParseAddrPort("203.0.113.9:80"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(want); err != nil {
		t.Fatal(err)
	}
	c.Close()
	select {
	case b := <-got:
		if !bytes.Equal(b, want) {
			t.Fatalf("received %d bytes, not the %d sent", len(b), len(want))
		}
	case <-ctx.Done():
		t.Fatal("the transfer did not end")
	}
	received := tr.Stack().Stats().IP.PacketsReceived.Value()
	if n := uint64(injected.Load()); received >= n {
		t.Fatalf("the stack received %d IP packets of %d injected: nothing was coalesced", received, n)
	}
}
