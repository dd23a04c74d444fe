//go:build !race

package proxyconn

import (
	"io"
	"net"
	"runtime"
	"testing"

	"switchyard/internal/heaptest"
	"switchyard/netx"
)

// idleBound is what an idle link may hold: 16 KiB of buffers, and an
// allowance of 4 KiB for the state around them. Measured, an idle link
// leaves 3.6 to 4.8 KiB: the Link (2.3 KiB, its 2 KiB inline buffer
// included), the pipe's two ends (1.7 KiB), and the reader's goroutine and
// channel (its g, a few hundred bytes; goroutine stacks are not heap). The
// code before it held 35 KiB: a 16 KiB staging buffer and a 16 KiB
// bufio.Reader for good.
const idleBound = 16<<10 + 4<<10

// A link that carried the largest datagram each way, and whose reader went
// back to waiting as the fan-out reader does, holds no buffer of its size:
// its inline buffer alone.
func TestIdleLinkMemory(t *testing.T) {
	const n = 200
	const bufSize, reserve = 16 << 10, 8
	payload := make([]byte, bufSize-reserve)
	reply := append(frame(1, ""), payload...)
	reply[0], reply[1] = byte((len(payload)+1)>>8), byte(len(payload)+1)
	links := make([]*Link, n)
	fars := make([]net.Conn, n)
	gots := make([]chan int, n)
	per := heaptest.PerItem(n, func() {
		for i := range n {
			a, b := net.Pipe()
			l := NewLink(a, lenFraming{}, bufSize, reserve)
			links[i], fars[i], gots[i] = l, b, make(chan int, 1)
			go heaptest.Reader(l, gots[i])
			go func() {
				bp := netx.GetBuf(bufSize)
				_, err := io.ReadFull(b, (*bp)[:3+len(payload)])
				netx.PutBuf(bp)
				if err == nil {
					b.Write(reply)
				}
			}()
			if err := l.WritePacket(payload, lenPeer); err != nil {
				t.Fatal(err)
			}
			if got := <-gots[i]; got != len(payload) {
				t.Fatalf("link %d read %d bytes, want %d", i, got, len(payload))
			}
		}
	})
	t.Logf("%.0f bytes of heap per idle link", per)
	if per > idleBound {
		t.Errorf("an idle link holds %.0f bytes of heap, want at most %d", per, idleBound)
	}
	for i := range n {
		links[i].Close()
		fars[i].Close()
		for range gots[i] {
		}
	}
	runtime.KeepAlive(links)
}
