package socks

import (
	"bytes"
	"io"
	"net/netip"
	"testing"
	"time"

	"switchyard/route/sniff/snifftest"

	"switchyard/inbound/internal/inboundtest"
	"switchyard/netx"
	"switchyard/protocol/socks5"
)

func TestSniff(t *testing.T) {
	echo, _ := inboundtest.TCPEcho(t, "127.0.0.1:0")
	dst := netx.AddrFromAddrPort(netip.MustParseAddrPort(echo.Addr().String()))
	tests := []struct {
		name     string
		first    []byte
		sniffed  string
		protocol string
	}{
		{"tls", snifftest.ClientHello(t, "secure.example.com"), "secure.example.com", "tls"},
		{"http", []byte("GET /x HTTP/1.1\r\nHost: Plain.Example.org:8080\r\nAccept: */*\r\n\r\n"), "plain.example.org", "http"},
		{"unknown", []byte("\x00\x01binary"), "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn, proxy := start(t, Config{Sniff: true})
			c := dial(t, proxy, "", "")
			code, bound := request(t, c, socks5.CmdConnect, dst)
			if code != socks5.ReplySucceeded || bound != (netx.Addr{IP: netip.IPv4Unspecified()}) {
				t.Fatalf("reply %#x %v; want success from 0.0.0.0:0", code, bound)
			}
			// The sniffed bytes reach the upstream: the echo returns them.
			echoes(t, c, tt.first)
			f := conn.Flows()[0]
			if f.Sniffed != tt.sniffed || f.Protocol != tt.protocol {
				t.Fatalf("flow sniffed %q protocol %q; want %q %q", f.Sniffed, f.Protocol, tt.sniffed, tt.protocol)
			}
			if f.Dst != dst {
				t.Fatalf("flow dst %v, want %v", f.Dst, dst)
			}
		})
	}
}

// A ClientHello written in two pieces is still sniffed: the inbound keeps
// reading while the record is incomplete.
func TestSniffSplitClientHello(t *testing.T) {
	echo, _ := inboundtest.TCPEcho(t, "127.0.0.1:0")
	dst := netx.AddrFromAddrPort(netip.MustParseAddrPort(echo.Addr().String()))
	hello := snifftest.ClientHello(t, "split.example.net")
	conn, proxy := start(t, Config{Sniff: true})
	c := dial(t, proxy, "", "")
	if code, _ := request(t, c, socks5.CmdConnect, dst); code != socks5.ReplySucceeded {
		t.Fatalf("reply %#x", code)
	}
	mustWrite(t, c, hello[:20])
	time.Sleep(50 * time.Millisecond)
	mustWrite(t, c, hello[20:])
	got := make([]byte, len(hello))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, hello) {
		t.Fatalf("the ClientHello did not come back whole: %v", err)
	}
	if f := conn.Flows()[0]; f.Sniffed != "split.example.net" {
		t.Fatalf("sniffed %q", f.Sniffed)
	}
}

// A UDP association asks for its packets to be sniffed exactly when the
// inbound sniffs: the fan-out does the sniffing, per packet.
func TestAssociationCarriesTheSniffSetting(t *testing.T) {
	for _, sniff := range []bool{false, true} {
		conn, proxy := start(t, Config{Tag: "u", UDP: true, Sniff: sniff})
		associateClient(t, proxy)
		deadline := time.Now().Add(5 * time.Second)
		for len(conn.Links()) == 0 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if len(conn.Links()) != 1 {
			t.Fatal("no association opened")
		}
		if f := conn.Flows()[0]; f.SniffPackets != sniff {
			t.Fatalf("sniff = %v: association flow has SniffPackets %v", sniff, f.SniffPackets)
		}
	}
}
