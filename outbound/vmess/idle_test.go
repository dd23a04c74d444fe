//go:build !race

package vmess

import (
	"runtime"
	"testing"

	"switchyard/internal/heaptest"
	"switchyard/netx"
	"switchyard/outbound/internal/proxytest"
	"switchyard/protocol/mux"
)

// idleBound is what an idle link may hold: 16 KiB of buffers, and an
// allowance of 8 KiB for the state around them. Measured, an idle link
// leaves 9.5 to 12 KiB on the heap, an XUDP one (with the Mux link's 2.3
// KiB) 12 to 13 KiB: the reader's 2 KiB small buffer, the session's codecs
// (AES-GCM and SHAKE states, 2.5 KiB), the TCP connection's two ends, the
// test's dial context, the goroutines of the reader and of the test server
// (their g's; stacks are not heap), the reader's channel, and the test
// server's freed buffers sharing spans with them. The code before it held
// 52 to 55 KiB (a chunk's staging buffer and a read buffer grown to 32
// KiB), with XUDP 112 KiB (the Mux link's two 32 KiB buffers besides).
const idleBound = 16<<10 + 8<<10

// A link that carried an 8,000-byte datagram each way (about the most a
// chunk carries), and whose reader went back to waiting as the fan-out
// reader does, holds no buffer of a chunk's size; nor does an XUDP link.
func TestIdleLinkMemory(t *testing.T) {
	const n = 200
	payload := make([]byte, 8000)
	for _, encoding := range []string{"", "xudp"} {
		t.Run("encoding="+encoding, func(t *testing.T) {
			stop := make(chan struct{})
			addr := newServer(t, func(s *session) {
				c := s.conn
				answerOnce(t, s)
				s = nil // the session's buffers are garbage; the connection stays open
				<-stop
				c.Close()
			})
			o := newOutboundEncoding(t, addr, "aes-128-gcm", encoding)
			links := make([]netx.PacketLink, n)
			gots := make([]chan int, n)
			dst := echoDst
			per := heaptest.PerItem(n, func() {
				for i := range n {
					l, err := o.DialPacket(proxytest.Ctx(t), udpFlow(dst))
					if err != nil {
						t.Fatal(err)
					}
					links[i], gots[i] = l, make(chan int, 1)
					go heaptest.Reader(l, gots[i])
					if err := l.WritePacket(payload, dst); err != nil {
						t.Fatal(err)
					}
					if got := <-gots[i]; got != len("re:")+len(payload) {
						t.Fatalf("link %d read %d bytes", i, got)
					}
				}
			})
			t.Logf("%.0f bytes of heap per idle link", per)
			if per > idleBound {
				t.Errorf("an idle link holds %.0f bytes of heap, want at most %d", per, idleBound)
			}
			close(stop)
			for i := range n {
				links[i].Close()
				for range gots[i] {
				}
			}
			runtime.KeepAlive(links)
		})
	}
}

// answerOnce writes the response header and answers the first datagram: a
// UDP flow's with its payload after "re:", a Mux stream's with a Keep frame
// from its peer carrying the same.
func answerOnce(t *testing.T, s *session) {
	if s.header(s.req.Check) != nil {
		return
	}
	if s.req.Command == 2 {
		if p, err := s.in.ReadChunk(s.r); err == nil {
			s.chunk(append([]byte("re:"), p...))
		}
		return
	}
	proxytest.MuxFrames(&bodyReader{s: s}, func(f mux.Frame) bool {
		out := mux.Frame{Status: mux.StatusKeep, Option: mux.OptionData, Network: mux.NetworkUDP, Target: f.Target, Data: append([]byte("re:"), f.Data...)}
		b, err := mux.AppendFrame(nil, &out)
		if err != nil {
			t.Errorf("server frame: %v", err)
			return false
		}
		s.chunk(b)
		return false
	})
}
