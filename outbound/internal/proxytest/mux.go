package proxytest

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/netip"
	"testing"

	"switchyard/netx"
	"switchyard/outbound"
	"switchyard/outbound/internal/proxyconn"
	"switchyard/protocol/mux"
)

// MuxFrames reads Mux.Cool frames from r and calls fn with each (its data
// copied) until r ends, a frame does not parse, or fn returns false.
func MuxFrames(r io.Reader, fn func(mux.Frame) bool) error {
	var p mux.Parser
	buf := make([]byte, 0, 1<<17)
	chunk := make([]byte, 4096)
	for {
		for {
			n, err := mux.FrameLen(buf)
			if err != nil {
				return err
			}
			if n > len(buf) {
				break
			}
			f, err := p.Parse(buf[:n])
			if err != nil {
				return err
			}
			f.Data = bytes.Clone(f.Data)
			if !fn(f) {
				return nil
			}
			buf = buf[:copy(buf, buf[n:])]
		}
		n, err := r.Read(chunk)
		if err != nil {
			return err
		}
		buf = append(buf, chunk[:n]...)
	}
}

// XUDPEcho is the server's Mux.Cool side of one XUDP session: it reads the
// client's frames from r and answers each with write, from the peer the
// frame names, with "re:" and the payload. Around each reply it writes a
// keep-alive, a frame of another session and a Keep frame without data,
// which the client must skip. The first frame must open the session (a New
// frame); its global ID is sent on gids. It returns when r ends or is
// closed.
func XUDPEcho(t testing.TB, r io.Reader, write func([]byte) error, gids chan<- [8]byte) {
	first := true
	err := MuxFrames(r, func(f mux.Frame) bool {
		want := mux.StatusKeep
		if first {
			want = mux.StatusNew
			gids <- f.GlobalID
		}
		first = false
		if f.Session != mux.XUDPSession || f.Status != want || f.Option != mux.OptionData || f.Network != mux.NetworkUDP {
			t.Errorf("client frame %+v", f)
			return false
		}
		for _, out := range []mux.Frame{
			{Status: mux.StatusKeepAlive, Option: mux.OptionData, Data: []byte("pad")},
			{Session: 9, Status: mux.StatusKeep, Option: mux.OptionData, Network: mux.NetworkUDP, Target: f.Target, Data: []byte("stray")},
			{Status: mux.StatusKeep},
			{Status: mux.StatusKeep, Option: mux.OptionData, Network: mux.NetworkUDP, Target: f.Target, Data: append([]byte("re:"), f.Data...)},
		} {
			b, err := mux.AppendFrame(nil, &out)
			if err != nil {
				t.Errorf("server frame: %v", err)
				return false
			}
			if write(b) != nil {
				return false
			}
		}
		return true
	})
	if err != nil && err != io.EOF && !errors.Is(err, net.ErrClosed) {
		t.Errorf("client frames: %v", err)
	}
}

// CheckXUDP requires of o, an outbound with XUDP whose server runs XUDPEcho
// and sends each session's global ID on gids: that one link carries
// packets of up to maxPayload bytes to every peer they name, each reply
// coming from that peer; that a larger packet is refused; and that two
// links of one source carry the same global ID, globalID(source), never
// zero.
func CheckXUDP(t *testing.T, o outbound.Outbound, maxPayload int, gids <-chan [8]byte, globalID func(netip.AddrPort) [8]byte) {
	t.Helper()
	src := netip.MustParseAddrPort("127.0.0.1:40000")
	first := netx.Addr{IP: netip.MustParseAddr("192.0.2.1"), Port: 53}
	flow := netx.Flow{Network: netx.UDP, Dst: first, Src: src}
	l, err := o.DialPacket(Ctx(t), flow)
	if err != nil {
		t.Fatal(err)
	}
	if !outbound.CarriesUDP(o) {
		t.Fatal("an outbound whose DialPacket opens a link reports CarriesUDP false")
	}
	defer l.Close()
	peers := []netx.Addr{first, {IP: netip.MustParseAddr("2001:db8::3"), Port: 443}, netx.DomainAddr("dns.test", 853)}
	buf := make([]byte, 65536)
	for _, size := range []int{1, 0, 1400, maxPayload} {
		for _, peer := range peers {
			payload := bytes.Repeat([]byte{'q'}, size)
			if err := l.WritePacket(payload, peer); err != nil {
				t.Fatal(err)
			}
			n, from, err := l.ReadPacket(buf)
			if err != nil || from != peer || string(buf[:n]) != "re:"+string(payload) {
				t.Fatalf("reply of %d from %v (want %v): %v", n, from, peer, err)
			}
		}
	}
	if err := l.WritePacket(make([]byte, maxPayload+1), first); !errors.Is(err, proxyconn.ErrFrameTooLarge) {
		t.Fatalf("oversized datagram: %v", err)
	}

	l2, err := o.DialPacket(Ctx(t), flow)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if err := l2.WritePacket([]byte("x"), first); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l2.ReadPacket(buf); err != nil {
		t.Fatal(err)
	}
	if g1, g2 := <-gids, <-gids; g1 != g2 || g1 == [8]byte{} || g1 != globalID(src) {
		t.Fatalf("global IDs %x and %x, want %x", g1, g2, globalID(src))
	}
}
