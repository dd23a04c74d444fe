package tun

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"switchyard/netx"
)

// A connection to any address becomes a flow toward that address, from the
// application's own address and port, and carries bytes both ways.
func TestTCPFlowKeepsTheDestination(t *testing.T) {
	conn := &fakeConnector{target: echoServer(t)}
	l := newLab(t, Config{}, conn)
	for _, dst := range []string{"203.0.113.7:80", "[2001:db8::7]:443"} {
		c, err := l.app.DialTCP(ctx5s(t), netip.MustParseAddrPort(dst))
		if err != nil {
			t.Fatalf("%s: %v", dst, err)
		}
		msg := []byte("hello " + dst)
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(msg))
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, msg) {
			t.Fatalf("%s: echoed %q, %v", dst, got, err)
		}
		local := c.LocalAddr().(*net.TCPAddr).AddrPort()
		c.Close()
		fs := conn.Flows()
		f := fs[len(fs)-1]
		if f.Network != netx.TCP || f.Dst.String() != dst || f.Src != netip.AddrPortFrom(local.Addr().Unmap(), local.Port()) || f.Inbound != "tun-in" {
			t.Fatalf("flow %+v, app at %s", f, local)
		}
	}
}

// A refused route answers the SYN with a reset: the application's connect
// fails at once with "connection refused", its handshake never completed.
func TestRefusedRouteResetsTheConnect(t *testing.T) {
	blocked := netip.MustParseAddrPort("203.0.113.9:443")
	conn := &fakeConnector{target: echoServer(t), refuse: map[netip.AddrPort]bool{blocked: true}}
	l := newLab(t, Config{}, conn)
	start := time.Now()
	_, err := l.app.DialTCP(ctx5s(t), blocked)
	if err == nil || !errors.Is(err, syscall.ECONNREFUSED) && !bytes.Contains([]byte(err.Error()), []byte("refused")) {
		t.Fatalf("connect to a blocked destination: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("the refusal took %v", d)
	}
}

// With sniffing, the TLS server name reaches the connector with the flow.
func TestTCPSniffsTheServerName(t *testing.T) {
	conn := &fakeConnector{target: echoServer(t)}
	l := newLab(t, Config{Sniff: true}, conn)
	c, err := l.app.DialTCP(ctx5s(t), netip.MustParseAddrPort("203.0.113.7:80"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := []byte("GET / HTTP/1.1\r\nHost: example.test\r\n\r\n")
	c.Write(req)
	got := make([]byte, len(req))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	fs := conn.Flows()
	if len(fs) != 1 || fs[0].Sniffed != "example.test" || fs[0].Protocol != "http" {
		t.Fatalf("flows %+v", fs)
	}
}
