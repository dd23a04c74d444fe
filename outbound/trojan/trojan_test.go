package trojan

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"switchyard/netx"
	"switchyard/outbound/internal/proxytest"
	codec "switchyard/protocol/trojan"
	"switchyard/spec"
)

// readRequest reads and checks a request header: the key of password, the
// command, the address; it returns the address's bytes.
func readRequest(t *testing.T, c net.Conn, password string, cmd byte) []byte {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	head := make([]byte, codec.KeyLen+3)
	if _, err := io.ReadFull(c, head); err != nil {
		t.Errorf("reading the request: %v", err)
		return nil
	}
	k := codec.NewKey(password)
	if !bytes.Equal(head[:codec.KeyLen], k[:]) || string(head[codec.KeyLen:codec.KeyLen+2]) != "\r\n" || head[codec.KeyLen+2] != cmd {
		t.Errorf("request head %q", head)
		return nil
	}
	var addr []byte
	one := make([]byte, 1)
	for !bytes.HasSuffix(addr, []byte("\r\n")) || len(addr) < 4 {
		if _, err := io.ReadFull(c, one); err != nil {
			t.Errorf("reading the address: %v", err)
			return nil
		}
		addr = append(addr, one[0])
	}
	c.SetReadDeadline(time.Time{})
	return addr[:len(addr)-2]
}

func TestStream(t *testing.T) {
	headerAlone := make(chan []byte, 1)
	addr := serve(t, func(c net.Conn) {
		headerAlone <- readRequest(t, c, "secret", codec.CmdConnect)
		io.Copy(c, c)
	})
	o := newTrojan(t, addr, "secret")
	if got := o.ProbeTarget().String(); got != addr {
		t.Fatalf("ProbeTarget %s, want %s", got, addr)
	}
	c, err := o.DialStream(context.Background(), netx.Flow{Dst: netx.DomainAddr("example.com", 443)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The request arrived on its own, before any of the flow's bytes.
	select {
	case a := <-headerAlone:
		if want := "\x03\x0bexample.com\x01\xbb"; string(a) != want {
			t.Fatalf("address %q, want %q", a, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the request did not arrive with DialStream")
	}
	payload := bytes.Repeat([]byte("0123456789"), 10000)
	go c.Write(payload)
	got := make([]byte, len(payload))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("echo: %v", err)
	}
	if _, ok := c.(interface{ CloseWrite() error }); !ok {
		t.Fatal("the stream cannot half-close")
	}
}

func TestPacketsNameTheirPeers(t *testing.T) {
	addr := serve(t, func(c net.Conn) {
		// The request names the first packet's peer, as the reference
		// clients do, not a 0.0.0.0:0 placeholder.
		if a, want := readRequest(t, c, "pw", codec.CmdUDPAssociate), "\x03\x0afirst.test\x00\x35"; string(a) != want {
			t.Errorf("udp request names %q, want %q (first.test:53)", a, want)
			return
		}
		// Answer each packet from its own peer with "re:" and the payload.
		br := make([]byte, 0, 70000)
		var p codec.PacketParser
		buf := make([]byte, 4096)
		for {
			n, err := c.Read(buf)
			if err != nil {
				return
			}
			br = append(br, buf[:n]...)
			for {
				fl, err := codec.PacketLen(br)
				if err != nil {
					t.Errorf("client packet: %v", err)
					return
				}
				if fl > len(br) {
					break
				}
				peer, payload, err := p.Parse(br[:fl])
				if err != nil {
					t.Errorf("client packet: %v", err)
					return
				}
				out, _ := codec.AppendPacket(nil, peer, append([]byte("re:"), payload...))
				c.Write(out)
				br = br[:copy(br, br[fl:])]
			}
		}
	})
	o := newTrojan(t, addr, "pw")
	l, err := o.DialPacket(context.Background(), netx.Flow{Network: netx.UDP, Dst: netx.DomainAddr("first.test", 53)})
	if err != nil {
		t.Fatal(err)
	}
	if !o.CarriesUDP() {
		t.Fatal("an outbound whose DialPacket opens a link reports CarriesUDP false")
	}
	defer l.Close()
	peers := []netx.Addr{
		{IP: netip.MustParseAddr("192.0.2.1"), Port: 53},
		{IP: netip.MustParseAddr("2001:db8::2"), Port: 5353},
		netx.DomainAddr("dns.test", 853),
	}
	buf := make([]byte, 65536)
	for _, size := range []int{0, 1, 1400, BufSize - codec.RequestHeaderMax - 3} {
		for _, peer := range peers {
			payload := bytes.Repeat([]byte{'x'}, size)
			if err := l.WritePacket(payload, peer); err != nil {
				t.Fatal(err)
			}
			n, from, err := l.ReadPacket(buf)
			if err != nil || from != peer || string(buf[:n]) != "re:"+string(payload) {
				t.Fatalf("reply of %d bytes from %v: %v", n, from, err)
			}
		}
	}
}

func TestDatagramTooLarge(t *testing.T) {
	addr := serve(t, func(c net.Conn) { io.Copy(io.Discard, c) })
	l, err := newTrojan(t, addr, "pw").DialPacket(context.Background(), netx.Flow{Network: netx.UDP})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	max := BufSize - codec.RequestHeaderMax // 16,064 bytes
	if err := l.WritePacket(make([]byte, max+1), netx.DomainAddr("a.test", 1)); err == nil || err.Error() != "frame larger than the client runtime's buffer" {
		t.Fatalf("%d bytes: %v", max+1, err)
	}
	if err := l.WritePacket(make([]byte, max), netx.DomainAddr("a.test", 1)); err != nil {
		t.Fatalf("%d bytes: %v", max, err)
	}
}

// A link fed bad bytes by the server fails with a clear error, and stays
// failed.
func TestServerBytes(t *testing.T) {
	big, _ := codec.AppendPacket(nil, netx.DomainAddr("a.test", 1), make([]byte, BufSize))
	good, _ := codec.AppendPacket(nil, netx.DomainAddr("a.test", 1), []byte("ok"))
	cases := []struct {
		name  string
		reply []byte
		want  string
	}{
		{"oversized frame", big, "upstream frame larger than the client runtime's buffer"},
		{"cut frame", good[:len(good)-1], "upstream closed inside a frame"},
		{"address type", []byte{9, 1, 2, 3}, "address type not supported"},
		{"no CRLF", append(good[:len(good)-4:len(good)-4], 'x', 'y', 'o', 'k'), "not CRLF"},
		{"clean end", nil, "EOF"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			addr := serve(t, func(c net.Conn) {
				readRequest(t, c, "pw", codec.CmdUDPAssociate)
				c.Write(tc.reply)
			})
			l, err := newTrojan(t, addr, "pw").DialPacket(context.Background(), netx.Flow{Network: netx.UDP})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			proxytest.ReadFailsForGood(t, l, tc.want)
		})
	}
}

func TestRefusedUpstreamIsADialError(t *testing.T) {
	o := newTrojan(t, proxytest.RefusedAddr(t), "pw")
	if c, err := o.DialStream(context.Background(), netx.Flow{Dst: netx.DomainAddr("a.test", 1)}); err == nil {
		c.Close()
		t.Fatal("stream over a refused upstream")
	}
	if l, err := o.DialPacket(context.Background(), netx.Flow{Network: netx.UDP}); err == nil {
		l.Close()
		t.Fatal("link over a refused upstream")
	}
}

func TestBadDestinationIsRefusedBeforeDialing(t *testing.T) {
	o := newTrojan(t, "127.0.0.1:1", "pw")
	_, err := o.DialStream(context.Background(), netx.Flow{Dst: netx.DomainAddr(strings.Repeat("n", 256), 1)})
	if err == nil || !strings.Contains(err.Error(), "longer than 255") {
		t.Fatalf("%v", err)
	}
}

func TestNew(t *testing.T) {
	base := spec.Outbound{Tag: "t", Type: "trojan", Server: "trojan.test:443", Password: "pw", TLS: &spec.TLS{}}
	if _, err := New(base, proxytest.Deps(nil)); err != nil {
		t.Fatal(err)
	}
	noTLS := base
	noTLS.TLS = nil
	if _, err := New(noTLS, proxytest.Deps(nil)); err == nil || !strings.Contains(err.Error(), "tls table is required") {
		t.Fatalf("no tls: %v", err)
	}
	noPassword := base
	noPassword.Password = ""
	if _, err := New(noPassword, proxytest.Deps(nil)); err == nil {
		t.Fatal("empty password built")
	}
	badServer := base
	badServer.Server = "nowhere"
	if _, err := New(badServer, proxytest.Deps(nil)); err == nil {
		t.Fatal("server without a port built")
	}
}
