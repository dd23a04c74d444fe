package xudp

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"testing"

	"go.uber.org/goleak"

	"switchyard/netx"
	"switchyard/outbound/internal/proxyconn"
	"switchyard/outbound/internal/proxytest"
	"switchyard/protocol/mux"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	bufSize = 16 << 10
	reserve = 278
)

// What the server sends decides what a read returns: a reply naming no peer
// comes from the link's target; the session's end, a frame a client never
// gets and bytes that do not fit fail the link for good.
func TestServerFrames(t *testing.T) {
	target := netx.DomainAddr("first.test", 53)
	frame := func(f mux.Frame) []byte { b, _ := mux.AppendFrame(nil, &f); return b }
	big := frame(mux.Frame{Status: mux.StatusKeep, Option: mux.OptionData, Data: make([]byte, bufSize)})
	cases := []struct {
		name  string
		reply []byte
		want  string // the error of the first read; "" for a reply
	}{
		{"reply without a peer", frame(mux.Frame{Status: mux.StatusKeep, Option: mux.OptionData, Data: []byte("re")}), ""},
		{"end", frame(mux.Frame{Status: mux.StatusEnd}), "EOF"},
		{"end with error", frame(mux.Frame{Status: mux.StatusEnd, Option: mux.OptionError}), "the server ended the session with an error"},
		{"new frame", frame(mux.Frame{Status: mux.StatusNew, Network: mux.NetworkUDP, Target: target}), "the server sent a new frame"},
		{"unknown status", []byte{0, 4, 0, 0, 7, 0}, "unknown session status"},
		{"oversized frame", big, "upstream frame larger than the client runtime's buffer"},
		{"cut frame", frame(mux.Frame{Status: mux.StatusKeep, Option: mux.OptionData, Data: []byte("abc")})[:8], "upstream closed inside a frame"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := proxytest.Dial(t, func(c net.Conn) { c.Write(tc.reply) })
			l := NewLink(c, target, [8]byte{1}, bufSize, reserve)
			defer l.Close()
			if tc.want != "" {
				proxytest.ReadFailsForGood(t, l, tc.want)
				return
			}
			buf := make([]byte, 100)
			if n, from, err := l.ReadPacket(buf); err != nil || from != target || string(buf[:n]) != "re" {
				t.Fatalf("%q from %v: %v", buf[:n], from, err)
			}
		})
	}
}

// The first packet opens the session with the global ID; a write that
// failed leaves the session to be opened by the next one.
func TestFirstPacketOpensTheSession(t *testing.T) {
	frames := make(chan mux.Frame, 2)
	c := proxytest.Dial(t, func(c net.Conn) {
		proxytest.MuxFrames(c, func(f mux.Frame) bool { frames <- f; return len(frames) < 2 })
	})
	l := NewLink(c, netx.DomainAddr("a.test", 1), [8]byte{7}, bufSize, reserve)
	defer l.Close()
	if err := l.WritePacket(make([]byte, bufSize), netx.DomainAddr("a.test", 1)); err == nil {
		t.Fatal("an oversized packet was sent")
	}
	for _, p := range []string{"one", "two"} {
		if err := l.WritePacket([]byte(p), netx.DomainAddr("a.test", 1)); err != nil {
			t.Fatal(err)
		}
	}
	if f := <-frames; f.Status != mux.StatusNew || f.GlobalID != [8]byte{7} || string(f.Data) != "one" {
		t.Fatalf("first frame %+v", f)
	}
	if f := <-frames; f.Status != mux.StatusKeep || string(f.Data) != "two" {
		t.Fatalf("second frame %+v", f)
	}
}

func TestGlobalIDs(t *testing.T) {
	ids, other := NewIDs(), NewIDs()
	src := netip.MustParseAddrPort("192.0.2.1:5000")
	if g := ids.For(src); g != ids.For(src) || g == [8]byte{} || g == other.For(src) {
		t.Fatalf("ids of one source: %x, %x; of another key: %x", g, ids.For(src), other.For(src))
	}
	if a, b := ids.For(netip.AddrPort{}), ids.For(netip.AddrPort{}); a == b {
		t.Fatal("links without a source share an ID")
	}
}

// A datagram longer than an XUDP frame carries as Xray's client sends it
// (8 KiB) is refused, for that datagram only.
func TestDatagramLongerThanAFrameIsRefused(t *testing.T) {
	c := proxytest.Dial(t, func(c net.Conn) { io.Copy(io.Discard, c) })
	l := NewLink(c, netx.DomainAddr("a.test", 1), [8]byte{7}, 32<<10, reserve)
	defer l.Close()
	err := l.WritePacket(make([]byte, MaxPacket+1), netx.DomainAddr("a.test", 1))
	if !errors.Is(err, proxyconn.ErrFrameTooLarge) {
		t.Fatalf("a datagram of %d bytes: %v", MaxPacket+1, err)
	}
	if err := l.WritePacket(make([]byte, MaxPacket), netx.DomainAddr("a.test", 1)); err != nil {
		t.Fatalf("a datagram of %d bytes: %v", MaxPacket, err)
	}
}
