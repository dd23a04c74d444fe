//go:build !race

package wireguard

import (
	"runtime"
	"testing"
	"time"

	"switchyard/internal/heaptest"
	"switchyard/netx"
)

// idleBound is what an idle link may hold: 16 KiB of buffers, and an
// allowance of 8 KiB for the state around them. Measured, one leaves 4.7 to
// 7.9 KiB on the heap: the stack's UDP endpoint, its waiter queue and the
// gonet conn over them, the link, and the reader's goroutine and channel
// (its g; stacks are not heap). The code before it was no PacketWaiter, so
// its reader waited in ReadPacket holding a 64 KiB buffer: 80 KiB in all.
const idleBound = 16<<10 + 8<<10

// A link that carried a 16 KiB datagram each way (fragmented in the
// tunnel), and whose reader went back to waiting as the fan-out reader
// does, holds no buffer of a datagram's size.
func TestIdleLinkMemory(t *testing.T) {
	const n = 200
	_, c := pair(t, "", nil)
	echo := mustAddr("10.7.0.1:9001")
	payload := make([]byte, 16<<10)
	// The tunnel comes up first, so that its handshake and the stack's
	// first buffers are not counted.
	first := dialLink(t, c)
	if w := waitReply(t, first, echo, payload); w.err != nil {
		t.Fatal(w.err)
	}
	links := make([]netx.PacketLink, n)
	gots := make([]chan int, n)
	per := heaptest.PerItem(n, func() {
		for i := range n {
			l, err := c.DialPacket(t.Context(), netx.Flow{Network: netx.UDP})
			if err != nil {
				t.Fatal(err)
			}
			links[i], gots[i] = l, make(chan int, 1)
			go heaptest.Reader(l, gots[i])
			got := 0
			for try := 0; got == 0; try++ {
				if try == 3 {
					t.Fatalf("link %d: no reply", i)
				}
				if err := l.WritePacket(payload, echo); err != nil {
					t.Fatal(err)
				}
				select {
				case got = <-gots[i]:
				case <-time.After(3 * time.Second):
				}
			}
			if got != len("p0:")+len(payload) {
				t.Fatalf("link %d read %d bytes", i, got)
			}
		}
	})
	t.Logf("%.0f bytes of heap per idle link", per)
	if per > idleBound {
		t.Errorf("an idle link holds %.0f bytes of heap, want at most %d", per, idleBound)
	}
	for i := range n {
		links[i].Close()
		for range gots[i] {
		}
	}
	runtime.KeepAlive(links)
}
