package vless

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"switchyard/netx"
	"switchyard/outbound/internal/proxytest"
	codec "switchyard/protocol/vless"
	"switchyard/spec"
)

func TestStream(t *testing.T) {
	headerAlone := make(chan []byte, 1)
	addr := proxytest.Listen(t, func(c net.Conn) {
		headerAlone <- readRequest(t, c, codec.CmdTCP)
		c.Write([]byte{0, 2, 0xaa, 0xbb}) // response header with two bytes of addons
		io.Copy(c, c)
	})
	o := newVLESS(t, addr, "")
	if got := o.ProbeTarget().String(); got != addr {
		t.Fatalf("ProbeTarget %s", got)
	}
	c, err := o.DialStream(context.Background(), netx.Flow{Dst: netx.DomainAddr("example.com", 443)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	select {
	case a := <-headerAlone:
		if got := hex.EncodeToString(a); got != "01bb020b"+hex.EncodeToString([]byte("example.com")) {
			t.Fatalf("address %s", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the request did not arrive with DialStream")
	}
	payload := bytes.Repeat([]byte("abcdefgh"), 20000)
	go c.Write(payload)
	got := make([]byte, len(payload))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("echo: %v", err)
	}
}

func TestStreamHalfClose(t *testing.T) {
	addr := proxytest.Listen(t, func(c net.Conn) {
		readRequest(t, c, codec.CmdTCP)
		b, _ := io.ReadAll(c) // until the client's half-close
		c.Write([]byte{0, 0})
		c.Write(append([]byte("got:"), b...))
	})
	c, err := newVLESS(t, addr, "").DialStream(context.Background(), netx.Flow{Dst: netx.DomainAddr("a.test", 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("request"))
	if err := c.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if b, err := io.ReadAll(c); err != nil || string(b) != "got:request" {
		t.Fatalf("%q, %v", b, err)
	}
}

func TestStreamResponseHeader(t *testing.T) {
	cases := []struct {
		name  string
		reply []byte
		want  string
	}{
		{"other version", []byte{1, 0, 'x'}, "unexpected response version 1"},
		{"closed before the header", nil, "upstream closed during the handshake"},
		{"closed inside the addons", []byte{0, 5, 1}, "upstream closed during the handshake"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			addr := proxytest.Listen(t, func(c net.Conn) {
				readRequest(t, c, codec.CmdTCP)
				c.Write(tc.reply)
			})
			c, err := newVLESS(t, addr, "").DialStream(context.Background(), netx.Flow{Dst: netx.DomainAddr("a.test", 1)})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, err = c.Read(make([]byte, 10))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v, want %q", err, tc.want)
			}
			if _, again := c.Read(make([]byte, 10)); again == nil || again.Error() != err.Error() {
				t.Fatalf("second read: %v", again)
			}
		})
	}
}

// A read deadline that passes inside the response header loses nothing.
func TestStreamResponseHeaderSurvivesADeadline(t *testing.T) {
	next := make(chan struct{})
	addr := proxytest.Listen(t, func(c net.Conn) {
		readRequest(t, c, codec.CmdTCP)
		c.Write([]byte{0, 3, 1})
		<-next
		c.Write([]byte{2, 3, 'o', 'k'})
	})
	c, err := newVLESS(t, addr, "").DialStream(context.Background(), netx.Flow{Dst: netx.DomainAddr("a.test", 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := c.Read(make([]byte, 10)); !errors.Is(err, errDeadline) {
		t.Fatalf("%v", err)
	}
	close(next)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b := make([]byte, 2)
	if _, err := io.ReadFull(c, b); err != nil || string(b) != "ok" {
		t.Fatalf("%q, %v", b, err)
	}
}

func TestSingleTargetPackets(t *testing.T) {
	target := netx.Addr{IP: netip.MustParseAddr("192.0.2.7"), Port: 53}
	addr := proxytest.Listen(t, func(c net.Conn) {
		if a := readRequest(t, c, codec.CmdUDP); hex.EncodeToString(a) != "003501c0000207" {
			t.Errorf("request names %x", a)
			return
		}
		c.Write([]byte{0, 0})
		var lenb [2]byte
		for {
			if _, err := io.ReadFull(c, lenb[:]); err != nil {
				return
			}
			p := make([]byte, int(lenb[0])<<8|int(lenb[1]))
			if _, err := io.ReadFull(c, p); err != nil {
				return
			}
			out, _ := codec.AppendPacket(nil, append([]byte("re:"), p...))
			c.Write(out)
		}
	})
	o := newVLESS(t, addr, "")
	l, err := o.DialPacket(context.Background(), netx.Flow{Network: netx.UDP, Dst: target})
	if err != nil {
		t.Fatal(err)
	}
	if !o.CarriesUDP() {
		t.Fatal("an outbound whose DialPacket opens a link reports CarriesUDP false")
	}
	defer l.Close()
	buf := make([]byte, 65536)
	other := netx.DomainAddr("other.test", 9)
	for _, size := range []int{0, 1, 1400, BufSize - codec.RequestHeaderMax - 3} {
		// The link carries one target: a packet naming another still goes
		// to it, and every reply comes from it.
		payload := bytes.Repeat([]byte{'u'}, size)
		if err := l.WritePacket(payload, other); err != nil {
			t.Fatal(err)
		}
		n, from, err := l.ReadPacket(buf)
		if err != nil || from != target || string(buf[:n]) != "re:"+string(payload) {
			t.Fatalf("reply of %d from %v: %v", n, from, err)
		}
	}
	if err := l.WritePacket(make([]byte, BufSize-codec.RequestHeaderMax+1), target); err == nil || err.Error() != "frame larger than the client runtime's buffer" {
		t.Fatalf("oversized datagram: %v", err)
	}
}

func TestSingleTargetServerBytes(t *testing.T) {
	big, _ := codec.AppendPacket(nil, make([]byte, BufSize))
	cases := []struct {
		name  string
		reply []byte
		want  string
	}{
		{"other version", []byte{7, 0}, "unexpected response version 7"},
		{"closed before the header", nil, "upstream closed during the handshake"},
		{"oversized frame", append([]byte{0, 0}, big...), "upstream frame larger than the client runtime's buffer"},
		{"cut frame", []byte{0, 0, 0, 5, 'a'}, "upstream closed inside a frame"},
		{"clean end", []byte{0, 0}, "EOF"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			addr := proxytest.Listen(t, func(c net.Conn) {
				readRequest(t, c, codec.CmdUDP)
				c.Write(tc.reply)
			})
			l, err := newVLESS(t, addr, "").DialPacket(context.Background(), netx.Flow{Network: netx.UDP, Dst: netx.DomainAddr("a.test", 1)})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			proxytest.ReadFailsForGood(t, l, tc.want)
		})
	}
}

func TestNew(t *testing.T) {
	base := spec.Outbound{Tag: "v", Type: "vless", Server: "vless.test:443", UUID: testUUID}
	if _, err := New(base, proxytest.Deps(nil)); err != nil {
		t.Fatal(err)
	}
	bad := map[string]func(*spec.Outbound){
		"vision flow":     func(o *spec.Outbound) { o.Flow = "xtls-rprx-vision" },
		"packet encoding": func(o *spec.Outbound) { o.PacketEncoding = "packetaddr" },
		"uuid":            func(o *spec.Outbound) { o.UUID = "not-a-uuid" },
		"server":          func(o *spec.Outbound) { o.Server = "vless.test" },
		"transport":       func(o *spec.Outbound) { o.Transport.Type = "carrier-pigeon" },
	}
	for name, change := range bad {
		o := base
		change(&o)
		if _, err := New(o, proxytest.Deps(nil)); err == nil {
			t.Errorf("%s: built", name)
		}
	}
}

func TestRefusedUpstreamIsADialError(t *testing.T) {
	addr := proxytest.RefusedAddr(t)
	for _, enc := range []string{"", "xudp"} {
		o := newVLESS(t, addr, enc)
		if c, err := o.DialStream(context.Background(), netx.Flow{Dst: netx.DomainAddr("a.test", 1)}); err == nil {
			c.Close()
			t.Fatal("stream over a refused upstream")
		}
		if l, err := o.DialPacket(context.Background(), netx.Flow{Network: netx.UDP, Dst: netx.DomainAddr("a.test", 1)}); err == nil {
			l.Close()
			t.Fatal("link over a refused upstream")
		}
	}
}

func TestCancelledDial(t *testing.T) {
	addr := proxytest.Listen(t, func(c net.Conn) { io.Copy(io.Discard, c) })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if c, err := newVLESS(t, addr, "").DialStream(ctx, netx.Flow{Dst: netx.DomainAddr("a.test", 1)}); err == nil {
		c.Close()
		t.Fatal("dialed with a cancelled context")
	}
}

// Over plain TCP a VLESS stream is the transport's bytes, for writes from
// the dial and for reads once the response header is read: it then hands
// the TCP conn to a relay to splice, and not before.
func TestStreamIsPassthroughOnceAnswered(t *testing.T) {
	addr := proxytest.Listen(t, func(c net.Conn) {
		readRequest(t, c, codec.CmdTCP)
		c.Write([]byte{0, 0})
		io.Copy(c, c)
	})
	c, err := newVLESS(t, addr, "").DialStream(context.Background(), netx.Flow{Dst: netx.DomainAddr("a.test", 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !netx.Settling(c, true) {
		t.Fatal("reads pass through before the response header was read")
	}
	if netx.Settling(c, false) {
		t.Fatal("writes do not pass through after the dial")
	}
	c.Write([]byte("ping"))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b := make([]byte, 4)
	if _, err := io.ReadFull(c, b); err != nil || string(b) != "ping" {
		t.Fatalf("%q, %v", b, err)
	}
	if netx.Settling(c, true) {
		t.Fatal("still settling after the response header")
	}
	if inner, _ := netx.Unwrap(c, true); !isTCP(inner) {
		t.Fatalf("unwraps to %T", inner)
	}
}

func isTCP(c net.Conn) bool {
	_, ok := c.(*net.TCPConn)
	return ok
}
