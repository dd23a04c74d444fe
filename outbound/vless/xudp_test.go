package vless

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"

	"switchyard/netx"
	"switchyard/protocol/mux"
	codec "switchyard/protocol/vless"
)

func TestXUDPPacketsNameTheirPeers(t *testing.T) {
	src := netip.MustParseAddrPort("127.0.0.1:40000")
	gids := make(chan [8]byte, 2)
	addr := serve(t, func(c net.Conn) {
		readRequest(t, c, codec.CmdMux)
		c.Write([]byte{0, 0})
		first := true
		err := frames(c, func(f mux.Frame) bool {
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
			// Around each reply: a keep-alive, a frame of another session
			// and a keep frame without data, all to be skipped.
			var out []byte
			out, _ = mux.AppendFrame(out, &mux.Frame{Status: mux.StatusKeepAlive, Option: mux.OptionData, Data: []byte("pad")})
			out, _ = mux.AppendFrame(out, &mux.Frame{Session: 9, Status: mux.StatusKeep, Option: mux.OptionData, Network: mux.NetworkUDP, Target: f.Target, Data: []byte("stray")})
			out, _ = mux.AppendFrame(out, &mux.Frame{Status: mux.StatusKeep})
			out, _ = mux.AppendFrame(out, &mux.Frame{Status: mux.StatusKeep, Option: mux.OptionData, Network: mux.NetworkUDP, Target: f.Target, Data: append([]byte("re:"), f.Data...)})
			c.Write(out)
			return true
		})
		if err != nil && err != io.EOF {
			t.Errorf("client frames: %v", err)
		}
	})
	o := newVLESS(t, addr, "xudp")
	first := netx.Addr{IP: netip.MustParseAddr("192.0.2.1"), Port: 53}
	l, err := o.DialPacket(context.Background(), netx.Flow{Network: netx.UDP, Dst: first, Src: src})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	peers := []netx.Addr{first, {IP: netip.MustParseAddr("2001:db8::3"), Port: 443}, netx.DomainAddr("dns.test", 853)}
	buf := make([]byte, 65536)
	for _, size := range []int{1, 0, 1400, BufSize - codec.RequestHeaderMax} {
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
	if err := l.WritePacket(make([]byte, BufSize-codec.RequestHeaderMax+1), first); err == nil || err.Error() != "frame larger than the client runtime's buffer" {
		t.Fatalf("oversized datagram: %v", err)
	}

	// The global ID is derived from the source: another link of the same
	// source carries the same one; it is never zero.
	l2, err := o.DialPacket(context.Background(), netx.Flow{Network: netx.UDP, Dst: first, Src: src})
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
	g1, g2 := <-gids, <-gids
	if g1 != g2 || g1 == [8]byte{} || g1 != mux.GlobalID(&o.gidKey, src) {
		t.Fatalf("global IDs %x and %x", g1, g2)
	}
}

func TestXUDPServerFrames(t *testing.T) {
	target := netx.DomainAddr("first.test", 53)
	frame := func(f mux.Frame) []byte { b, _ := mux.AppendFrame(nil, &f); return b }
	big := frame(mux.Frame{Status: mux.StatusKeep, Option: mux.OptionData, Data: make([]byte, BufSize)})
	cases := []struct {
		name  string
		reply []byte
		// what the first read returns: a reply from, or an error
		from netx.Addr
		want string
	}{
		{"reply without a peer", frame(mux.Frame{Status: mux.StatusKeep, Option: mux.OptionData, Data: []byte("re")}), target, ""},
		{"end", frame(mux.Frame{Status: mux.StatusEnd}), netx.Addr{}, "EOF"},
		{"end with error", frame(mux.Frame{Status: mux.StatusEnd, Option: mux.OptionError}), netx.Addr{}, "the server ended the session with an error"},
		{"new frame", frame(mux.Frame{Status: mux.StatusNew, Network: mux.NetworkUDP, Target: target}), netx.Addr{}, "the server sent a new frame"},
		{"unknown status", []byte{0, 4, 0, 0, 7, 0}, netx.Addr{}, "unknown session status"},
		{"oversized frame", big, netx.Addr{}, "upstream frame larger than the client runtime's buffer"},
		{"cut frame", frame(mux.Frame{Status: mux.StatusKeep, Option: mux.OptionData, Data: []byte("abc")})[:8], netx.Addr{}, "upstream closed inside a frame"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			addr := serve(t, func(c net.Conn) {
				readRequest(t, c, codec.CmdMux)
				c.Write(append([]byte{0, 0}, tc.reply...))
			})
			l, err := newVLESS(t, addr, "xudp").DialPacket(context.Background(), netx.Flow{Network: netx.UDP, Dst: target})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			buf := make([]byte, 65536)
			n, from, err := l.ReadPacket(buf)
			if tc.want == "" {
				if err != nil || from != tc.from || string(buf[:n]) != "re" {
					t.Fatalf("%q from %v: %v", buf[:n], from, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v, want %q", err, tc.want)
			}
			if _, _, again := l.ReadPacket(buf); again == nil || again.Error() != err.Error() {
				t.Fatalf("second read: %v", again)
			}
		})
	}
}
