package http

import (
	"io"
	"net/netip"
	"testing"

	"switchyard/route/sniff/snifftest"

	"switchyard/inbound/internal/inboundtest"
	"switchyard/netx"
)

func TestConnect(t *testing.T) {
	echo, _ := inboundtest.TCPEcho(t, "127.0.0.1:0")
	conn, proxy := start(t, Config{Tag: "h1"})
	cl := dial(t, proxy)
	// Bytes sent right after the head go through too.
	cl.send("CONNECT " + echo.Addr().String() + " HTTP/1.1\r\nHost: " + echo.Addr().String() + "\r\n\r\nearly")
	cl.established()
	cl.send(" and late")
	got := make([]byte, len("early and late"))
	if _, err := io.ReadFull(cl.br, got); err != nil || string(got) != "early and late" {
		t.Fatalf("echo %q, %v", got, err)
	}
	want := netx.Flow{
		Network: netx.TCP, Dst: netx.AddrFromAddrPort(netip.MustParseAddrPort(echo.Addr().String())),
		Src: netip.MustParseAddrPort(cl.c.LocalAddr().String()), Inbound: "h1",
	}
	if f := conn.Flows(); len(f) != 1 || f[0] != want {
		t.Fatalf("flows %+v, want [%+v]", f, want)
	}
}

func TestConnectSniff(t *testing.T) {
	echo, _ := inboundtest.TCPEcho(t, "127.0.0.1:0")
	hello := snifftest.ClientHello(t, "tunnel.example.com")
	conn, proxy := start(t, Config{Sniff: true})
	cl := dial(t, proxy)
	cl.send("CONNECT " + echo.Addr().String() + " HTTP/1.1\r\n\r\n")
	cl.established()
	cl.send(string(hello))
	got := make([]byte, len(hello))
	if _, err := io.ReadFull(cl.br, got); err != nil || string(got) != string(hello) {
		t.Fatalf("the ClientHello did not come back: %v", err)
	}
	if f := conn.Flows()[0]; f.Sniffed != "tunnel.example.com" || f.Protocol != "tls" {
		t.Fatalf("flow sniffed %q protocol %q", f.Sniffed, f.Protocol)
	}
}
