package proxyconn

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"switchyard/netx"
)

// lenFraming is a length, a tag byte and the payload; a frame tagged 0
// carries no packet, one tagged 0xff is refused.
type lenFraming struct{}

var lenPeer = netx.DomainAddr("peer.test", 7)

func (lenFraming) AppendFrame(dst, p []byte, _ netx.Addr) ([]byte, error) {
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(p)+1))
	return append(append(dst, 1), p...), nil
}

func (lenFraming) FrameLen(b []byte) (int, error) {
	if len(b) < 2 {
		return 2, nil
	}
	return 2 + int(binary.BigEndian.Uint16(b)), nil
}

func (lenFraming) OpenFrame(frame []byte) ([]byte, netx.Addr, bool, error) {
	switch frame[2] {
	case 0:
		return nil, netx.Addr{}, false, nil
	case 0xff:
		return nil, netx.Addr{}, false, fmt.Errorf("tag %#x", frame[2])
	}
	return frame[3:], lenPeer, true, nil
}

func frame(tag byte, p string) []byte {
	return append(binary.BigEndian.AppendUint16(nil, uint16(len(p)+1)), append([]byte{tag}, p...)...)
}

// pipeLink is a link of 64-byte buffers over one end of a pipe, and the
// other end.
func pipeLink(t *testing.T) (*Link, net.Conn) {
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	return NewLink(a, lenFraming{}, 64, 8), b
}

func TestLinkReads(t *testing.T) {
	cases := []struct {
		name  string
		wire  []byte
		reply string // the payload read first, or
		want  string // the error of the first read, returned again after
	}{
		{"a packet", frame(1, "hello"), "hello", ""},
		{"a frame without a packet first", append(frame(0, "skip"), frame(1, "hi")...), "hi", ""},
		{"the largest frame", frame(1, strings.Repeat("x", 61)), strings.Repeat("x", 61), ""},
		{"a frame past the buffer", frame(1, strings.Repeat("x", 62)), "", ErrUpstreamFrameTooLarge.Error()},
		{"a frame cut", frame(1, "hello")[:4], "", ErrFrameClosed.Error()},
		{"a clean end", nil, "", "EOF"},
		{"a refused frame", frame(0xff, ""), "", "tag 0xff"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, far := pipeLink(t)
			go func() { far.Write(tc.wire); far.Close() }()
			buf := make([]byte, 100)
			n, from, err := l.ReadPacket(buf)
			if tc.want == "" {
				if err != nil || from != lenPeer || string(buf[:n]) != tc.reply {
					t.Fatalf("%q from %v, %v", buf[:n], from, err)
				}
				return
			}
			if err == nil || err.Error() != tc.want {
				t.Fatalf("%v, want %q", err, tc.want)
			}
			if _, _, again := l.ReadPacket(buf); again != err {
				t.Fatalf("second read: %v", again)
			}
		})
	}
}

// A read cut by its deadline inside a frame loses nothing; a payload longer
// than the caller's buffer is truncated, as UDP does.
func TestLinkReadResumesAfterADeadline(t *testing.T) {
	l, far := pipeLink(t)
	f := frame(1, "patience")
	go far.Write(f[:4])
	l.conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, _, err := l.ReadPacket(make([]byte, 100)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("%v", err)
	}
	l.conn.SetReadDeadline(time.Time{})
	go far.Write(f[4:])
	buf := make([]byte, 3)
	if n, _, err := l.ReadPacket(buf); err != nil || string(buf[:n]) != "pat" {
		t.Fatalf("%q, %v", buf[:n], err)
	}
}

func TestLinkWrites(t *testing.T) {
	l, far := pipeLink(t)
	got := make(chan []byte)
	go func() {
		b := make([]byte, 100)
		n, _ := io.ReadAtLeast(far, b, len(frame(1, "ok")))
		got <- b[:n]
	}()
	if err := l.WritePacket([]byte("ok"), lenPeer); err != nil {
		t.Fatal(err)
	}
	if b := <-got; string(b) != string(frame(1, "ok")) {
		t.Fatalf("wrote %q", b)
	}
	// 56 bytes and the reserve of 8 fill the 64-byte buffer.
	if err := l.WritePacket(make([]byte, 57), lenPeer); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("%v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, _, err := l.ReadPacket(make([]byte, 10)); !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("read after Close: %v", err)
	}
}
