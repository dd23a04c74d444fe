package socks5

import (
	"bytes"
	"errors"
	"io"
	"net/netip"
	"strings"
	"testing"

	"switchyard/netx"
)

func TestGreetingRoundTrip(t *testing.T) {
	b, err := AppendGreeting(nil, MethodNoAuth, MethodUserPass)
	if err != nil {
		t.Fatal(err)
	}
	methods, err := ReadGreeting(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(methods, []byte{MethodNoAuth, MethodUserPass}) {
		t.Fatalf("methods = %v", methods)
	}
	if _, err := AppendGreeting(nil); err == nil {
		t.Fatal("a greeting with no method was encoded")
	}

	m, err := ReadMethodChoice(bytes.NewReader(AppendMethodChoice(nil, MethodUserPass)))
	if err != nil || m != MethodUserPass {
		t.Fatalf("ReadMethodChoice = %v, %v", m, err)
	}
	_, err = ReadMethodChoice(bytes.NewReader(AppendMethodChoice(nil, MethodNoAcceptable)))
	if !errors.Is(err, ErrNoAcceptableMethod) {
		t.Fatalf("0xFF choice: err = %v", err)
	}
}

func TestGreetingErrors(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"socks4", "\x04\x01\x00", "socks5: unsupported version 4"},
		{"no methods", "\x05\x00", "offers no method"},
		{"truncated methods", "\x05\x03\x00", "unexpected EOF"},
		{"empty", "", "EOF"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadGreeting(strings.NewReader(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tt.want)
			}
		})
	}
}

func TestUserPassRoundTrip(t *testing.T) {
	b, err := AppendUserPass(nil, "alice", "s3cret")
	if err != nil {
		t.Fatal(err)
	}
	u, p, err := ReadUserPass(bytes.NewReader(b))
	if err != nil || u != "alice" || p != "s3cret" {
		t.Fatalf("ReadUserPass = %q, %q, %v", u, p, err)
	}
	if err := ReadUserPassStatus(bytes.NewReader(AppendUserPassStatus(nil, true))); err != nil {
		t.Fatalf("accepted status: %v", err)
	}
	if err := ReadUserPassStatus(bytes.NewReader(AppendUserPassStatus(nil, false))); !errors.Is(err, ErrAuthRejected) {
		t.Fatalf("rejected status: %v", err)
	}
	if _, err := AppendUserPass(nil, strings.Repeat("u", 256), "p"); err == nil {
		t.Fatal("a 256-byte username was encoded")
	}
	if _, _, err := ReadUserPass(strings.NewReader("\x05\x01u\x01p")); err == nil || !strings.Contains(err.Error(), "version 5") {
		t.Fatalf("wrong sub-negotiation version: %v", err)
	}
	if _, _, err := ReadUserPass(strings.NewReader("\x01\x05ab")); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("truncated credentials: %v", err)
	}
}

func TestRequestRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		cmd  byte
		addr netx.Addr
	}{
		{"ipv4", CmdConnect, netx.Addr{IP: netip.MustParseAddr("192.0.2.7"), Port: 443}},
		{"ipv6", CmdConnect, netx.Addr{IP: netip.MustParseAddr("2001:db8::1"), Port: 8080}},
		{"domain", CmdConnect, netx.DomainAddr("example.com", 80)},
		{"associate", CmdUDPAssociate, netx.Addr{IP: netip.IPv4Unspecified()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := AppendRequest(nil, tt.cmd, tt.addr)
			if err != nil {
				t.Fatal(err)
			}
			req, err := ReadRequest(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			if req.Cmd != tt.cmd || req.Dst != tt.addr {
				t.Fatalf("got %+v, want cmd %d dst %v", req, tt.cmd, tt.addr)
			}
		})
	}
}

func TestRequestNormalisesIPNames(t *testing.T) {
	b, _ := AppendRequest(nil, CmdConnect, netx.DomainAddr("127.0.0.1", 80))
	req, err := ReadRequest(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if req.Dst.IsName() || req.Dst.IP != netip.MustParseAddr("127.0.0.1") {
		t.Fatalf("dst = %#v, want the IP 127.0.0.1", req.Dst)
	}
}

func TestRequestErrors(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    string
		is      error
		wantCmd byte
	}{
		{name: "socks4", in: "\x04\x01\x00\x01\x7f\x00\x00\x01\x00\x50", want: "socks5: unsupported version 4"},
		{name: "bind", in: "\x05\x02\x00\x01\x7f\x00\x00\x01\x00\x50", is: ErrCommandNotSupported, wantCmd: CmdBind},
		{name: "unknown command", in: "\x05\x09\x00\x01\x7f\x00\x00\x01\x00\x50", is: ErrCommandNotSupported, wantCmd: 9},
		{name: "unknown atyp", in: "\x05\x01\x00\x02\x7f\x00\x00\x01\x00\x50", is: ErrAddressTypeNotSupported},
		{name: "empty domain", in: "\x05\x01\x00\x03\x00\x00\x50", want: "socks5: empty domain name"},
		{name: "domain with a space", in: "\x05\x01\x00\x03\x03a b\x00\x50", want: "holds byte 0x20"},
		{name: "reserved", in: "\x05\x01\x01\x01\x7f\x00\x00\x01\x00\x50", want: "reserved byte"},
		{name: "truncated ipv6", in: "\x05\x01\x00\x04\x00\x00", is: io.ErrUnexpectedEOF},
		{name: "truncated domain", in: "\x05\x01\x00\x03\x05ab", is: io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := ReadRequest(strings.NewReader(tt.in))
			if err == nil {
				t.Fatalf("no error, request %+v", req)
			}
			if tt.want != "" && !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tt.want)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Fatalf("err = %v, want Is %v", err, tt.is)
			}
			if tt.wantCmd != 0 && req.Cmd != tt.wantCmd {
				t.Fatalf("request cmd = %d, want %d", req.Cmd, tt.wantCmd)
			}
		})
	}
}

func TestReplyRoundTrip(t *testing.T) {
	bound := netx.Addr{IP: netip.MustParseAddr("10.1.2.3"), Port: 5000}
	b := AppendReply(nil, ReplySucceeded, bound)
	want := []byte{5, 0, 0, 1, 10, 1, 2, 3, 0x13, 0x88}
	if !bytes.Equal(b, want) {
		t.Fatalf("reply = % x, want % x", b, want)
	}
	code, got, err := ReadReply(bytes.NewReader(b))
	if err != nil || code != ReplySucceeded || got != bound {
		t.Fatalf("ReadReply = %d, %v, %v", code, got, err)
	}
	// No bound address: 0.0.0.0:0.
	if b := AppendReply(nil, ReplyConnectionRefused, netx.Addr{}); !bytes.Equal(b, []byte{5, 5, 0, 1, 0, 0, 0, 0, 0, 0}) {
		t.Fatalf("refusal = % x", b)
	}
	if _, _, err := ReadReply(strings.NewReader("\x04\x00\x00\x01")); err == nil || !strings.Contains(err.Error(), "unexpected server version 4") {
		t.Fatalf("wrong version: %v", err)
	}
}

func TestUDPRoundTrip(t *testing.T) {
	addrs := []netx.Addr{
		{IP: netip.MustParseAddr("198.51.100.9"), Port: 53},
		{IP: netip.MustParseAddr("2001:db8::53"), Port: 53},
		netx.DomainAddr("dns.example", 853),
	}
	for _, a := range addrs {
		pkt := AppendUDP(nil, a, []byte("payload"))
		dst, payload, err := ParseUDP(pkt)
		if err != nil {
			t.Fatalf("%v: %v", a, err)
		}
		if dst != a || string(payload) != "payload" {
			t.Fatalf("%v: got %v %q", a, dst, payload)
		}
	}
	long := netx.DomainAddr(strings.Repeat("a", 256), 1)
	if b := AppendUDP([]byte{9}, long, []byte("x")); !bytes.Equal(b, []byte{9}) {
		t.Fatalf("an unwritable address appended % x", b)
	}
}

func TestParseUDPErrors(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want string
		is   error
	}{
		{name: "short", in: []byte{0, 0, 0}, want: "shorter than a header"},
		{name: "reserved", in: []byte{0, 1, 0, 1, 1, 2, 3, 4, 0, 53}, want: "reserved bytes"},
		{name: "fragment", in: []byte{0, 0, 1, 1, 1, 2, 3, 4, 0, 53}, is: ErrFragmented},
		{name: "truncated", in: []byte{0, 0, 0, 4, 1, 2, 3}, want: "truncated"},
		{name: "unknown atyp", in: []byte{0, 0, 0, 7, 1}, is: ErrAddressTypeNotSupported},
		{name: "empty domain", in: []byte{0, 0, 0, 3, 0, 0, 53}, want: "empty domain"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := ParseUDP(tt.in)
			if err == nil {
				t.Fatal("no error")
			}
			if tt.want != "" && !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tt.want)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Fatalf("err = %v, want Is %v", err, tt.is)
			}
		})
	}
}

func TestUDPAllocations(t *testing.T) {
	buf := make([]byte, 0, 2048)
	payload := make([]byte, 1200)
	v6 := netx.Addr{IP: netip.MustParseAddr("2001:db8::1"), Port: 443}
	if n := testing.AllocsPerRun(100, func() { _ = AppendUDP(buf[:0], v6, payload) }); n != 0 {
		t.Fatalf("AppendUDP allocates %v times per datagram", n)
	}
	pktIP := AppendUDP(nil, v6, payload)
	if n := testing.AllocsPerRun(100, func() { _, _, _ = ParseUDP(pktIP) }); n != 0 {
		t.Fatalf("ParseUDP of an IP datagram allocates %v times", n)
	}
	var p UDPParser
	pktA := AppendUDP(nil, netx.DomainAddr("a.example", 53), payload)
	pktB := AppendUDP(nil, netx.DomainAddr("b.example", 53), payload)
	if n := testing.AllocsPerRun(100, func() {
		_, _, _ = p.Parse(pktA)
		_, _, _ = p.Parse(pktB)
	}); n != 0 {
		t.Fatalf("UDPParser allocates %v times for names it has seen", n)
	}
}

func BenchmarkUDP(b *testing.B) {
	payload := make([]byte, 1200)
	v4 := netx.Addr{IP: netip.MustParseAddr("198.51.100.1"), Port: 443}
	buf := make([]byte, 0, MaxUDPHeaderLen+len(payload))
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(payload)))
		for b.Loop() {
			buf = AppendUDP(buf[:0], v4, payload)
		}
	})
	pkt := AppendUDP(nil, netx.DomainAddr("quic.example.com", 443), payload)
	b.Run("parse-name", func(b *testing.B) {
		var p UDPParser
		b.ReportAllocs()
		b.SetBytes(int64(len(payload)))
		for b.Loop() {
			p.Parse(pkt)
		}
	})
}
