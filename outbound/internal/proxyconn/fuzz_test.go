package proxyconn

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"testing"

	"switchyard/netx"
)

// fuzzFraming is a length and a tag byte before the payload, as lenFraming,
// except that a frame of length 0 (no tag) carries no packet either.
type fuzzFraming struct{ lenFraming }

func (fuzzFraming) OpenFrame(frame []byte) ([]byte, netx.Addr, bool, error) {
	if len(frame) < 3 {
		return nil, netx.Addr{}, false, nil
	}
	return lenFraming{}.OpenFrame(frame)
}

// scriptConn serves wire in reads whose sizes a script sets: step s is a
// deadline that passes when 0, a read of at most 1+s*s/2 bytes otherwise.
// Once wire is served every read is io.EOF; with eofWithData the last bytes
// come with it.
type scriptConn struct {
	net.Conn
	wire        []byte
	script      []byte
	eofWithData bool
}

func (c *scriptConn) Read(p []byte) (int, error) {
	if len(c.wire) == 0 {
		return 0, io.EOF
	}
	step := byte(255)
	if len(c.script) > 0 {
		step, c.script = c.script[0], c.script[1:]
	}
	if step == 0 {
		return 0, os.ErrDeadlineExceeded
	}
	n := copy(p, c.wire[:min(len(c.wire), 1+int(step)*int(step)/2)])
	c.wire = c.wire[n:]
	if len(c.wire) == 0 && c.eofWithData {
		return n, io.EOF
	}
	return n, nil
}

func (c *scriptConn) Close() error { return nil }

// modelRead is what reading wire must give: the packets' payloads in
// order, then the error that ends reading.
func modelRead(wire []byte, bufSize int) (packets [][]byte, end string) {
	for {
		switch {
		case len(wire) == 0:
			return packets, io.EOF.Error()
		case len(wire) < 2:
			return packets, ErrFrameClosed.Error()
		}
		n := 2 + int(binary.BigEndian.Uint16(wire))
		switch {
		case n > bufSize:
			return packets, ErrUpstreamFrameTooLarge.Error()
		case n > len(wire):
			return packets, ErrFrameClosed.Error()
		}
		frame := wire[:n]
		wire = wire[n:]
		switch {
		case n < 3 || frame[2] == 0:
		case frame[2] == 0xff:
			return packets, fmt.Sprintf("tag %#x", frame[2])
		default:
			packets = append(packets, frame[3:])
		}
	}
}

// FuzzLinkRead feeds a link frames cut in reads of any size, with deadlines
// between them, and reads them as the fan-out reader does (WaitPacket, then
// ReadPacket into a buffer of the size it returned) or with ReadPacket
// alone: the packets and the final error are what the frames say, whatever
// the cuts, the link's size and the inline buffer's (cut short here, so
// that small frames take the pooled buffer's path too); the pooled buffer
// is held only while bytes are buffered.
func FuzzLinkRead(f *testing.F) {
	var seed []byte
	for _, size := range []int{0, 5, 60, 1400, inlineSize - 3, inlineSize + 10} {
		seed = append(seed, frame(1, string(bytes.Repeat([]byte{'p'}, size)))...)
		seed = append(seed, frame(0, "skip")...)
	}
	f.Add(seed, []byte{1, 0, 200, 3, 0, 255, 9}, uint8(6), uint8(0), uint8(0))
	f.Add(seed, []byte{}, uint8(3), uint8(3), uint8(0))
	f.Add(seed[:200], []byte{3, 0, 9, 1, 1, 0, 40}, uint8(1), uint8(2), uint8(9))
	f.Add(append(frame(1, "dns"), frame(1, "answer")[:4]...), []byte{2, 0, 1}, uint8(0), uint8(1), uint8(4))
	f.Add(append(frame(1, "ok"), frame(0xff, "")...), []byte{}, uint8(1), uint8(2), uint8(0))
	f.Add([]byte{0xff, 0xff, 1}, []byte{1}, uint8(5), uint8(0), uint8(0))
	f.Fuzz(func(t *testing.T, wire, script []byte, sizeSel, mode, inline uint8) {
		sizes := []int{3, 64, 100, inlineSize - 1, inlineSize, inlineSize + 1, 5000, 16 << 10, 32 << 10}
		bufSize := sizes[int(sizeSel)%len(sizes)]
		c := &scriptConn{wire: wire, script: script, eofWithData: mode&1 != 0}
		l := NewLink(c, fuzzFraming{}, bufSize, 0)
		if inline > 0 {
			// 2 bytes at least: a frame's length.
			l.inlineLen = min(l.inlineLen, 2+int(inline)%64)
			l.buf = l.inlineBuf()
		}
		wantPackets, wantEnd := modelRead(wire, bufSize)
		var got [][]byte
		var end error
		for deadlines := 0; ; {
			var p []byte
			if mode&2 != 0 {
				n, err := l.WaitPacket()
				if err != nil {
					if errors.Is(err, os.ErrDeadlineExceeded) && deadlines < len(script) {
						deadlines++
						continue
					}
					end = err
					break
				}
				p = make([]byte, n)
			} else {
				p = make([]byte, bufSize)
			}
			n, from, err := l.ReadPacket(p)
			if errors.Is(err, os.ErrDeadlineExceeded) && deadlines < len(script) {
				deadlines++
				continue
			}
			if err != nil {
				end = err
				break
			}
			if mode&2 != 0 && n != len(p) {
				t.Fatalf("ReadPacket read %d bytes, WaitPacket said %d", n, len(p))
			}
			if from != lenPeer {
				t.Fatalf("packet from %v", from)
			}
			got = append(got, p[:n])
			if l.r == l.w && l.pooled != nil {
				t.Fatal("the pooled buffer is held with nothing buffered")
			}
		}
		if len(got) != len(wantPackets) {
			t.Fatalf("%d packets, want %d", len(got), len(wantPackets))
		}
		for i := range got {
			if !bytes.Equal(got[i], wantPackets[i]) {
				t.Fatalf("packet %d: %d bytes, want %d", i, len(got[i]), len(wantPackets[i]))
			}
		}
		if end.Error() != wantEnd {
			t.Fatalf("reading ended with %v, want %s", end, wantEnd)
		}
		if l.pooled != nil {
			t.Fatal("a link that reads no more holds its pooled buffer")
		}
		if _, _, err := l.ReadPacket(make([]byte, 1)); err != end {
			t.Fatalf("a read after the end: %v, want %v again", err, end)
		}
		if _, err := l.WaitPacket(); err != end {
			t.Fatalf("a wait after the end: %v, want %v again", err, end)
		}
	})
}
