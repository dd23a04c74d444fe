//go:build !race

package socks

import (
	"net"
	"runtime"
	"testing"

	"switchyard/internal/heaptest"
	"switchyard/netx"
	"switchyard/outbound/internal/proxytest"
)

// idleBound is what an idle association may hold: 16 KiB of buffers, and
// an allowance of 8 KiB for the state around them. Measured, one leaves 4.4
// to 6.7 KiB on the heap, both ends of the test included: the link, its
// control connection and UDP socket (the client's and the test server's
// ends), the control drain's and the server's goroutines (their g's and
// the drain's 256-byte sink; stacks are not heap) and the reader's
// channel. The code before it kept the buffer its largest datagram was
// framed in: 69 KiB in all here.
const idleBound = 16<<10 + 8<<10

// An association that carried a datagram as large as the test relay takes
// each way, and whose reader went back to waiting as the fan-out reader
// does, holds no buffer of a datagram's size.
func TestIdleLinkMemory(t *testing.T) {
	const n = 200
	r, addr := startRelay(t, "udp4", "", "", nil)
	go func() {
		for range r.requests {
		}
	}()
	var controls []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for c := range r.control {
			controls = append(controls, c)
		}
	}()
	o := newOutbound(t, addr, "", "", nil)
	peer := netx.DomainAddr("peer.example", 53)
	payload := make([]byte, 60000)
	links := make([]netx.PacketLink, n)
	gots := make([]chan int, n)
	per := heaptest.PerItem(n, func() {
		for i := range n {
			l, err := o.DialPacket(proxytest.Ctx(t), netx.Flow{Network: netx.UDP})
			if err != nil {
				t.Fatal(err)
			}
			links[i], gots[i] = l, make(chan int, 1)
			go heaptest.Reader(l, gots[i])
			if err := l.WritePacket(payload, peer); err != nil {
				t.Fatal(err)
			}
			if got := <-gots[i]; got != len("echo:")+len(payload) {
				t.Fatalf("association %d read %d bytes", i, got)
			}
		}
	})
	t.Logf("%.0f bytes of heap per idle association", per)
	if per > idleBound {
		t.Errorf("an idle association holds %.0f bytes of heap, want at most %d", per, idleBound)
	}
	for i := range n {
		links[i].Close()
		for range gots[i] {
		}
	}
	runtime.KeepAlive(links)
	close(r.requests)
	close(r.control)
	<-done
	for _, c := range controls {
		c.Close()
	}
}
