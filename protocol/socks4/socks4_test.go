package socks4

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/netip"
	"strings"
	"testing"

	"switchyard/netx"
)

func TestReadRequest(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Request
	}{
		{"socks4", "\x04\x01\x00\x50\x7f\x00\x00\x01alice\x00",
			Request{Cmd: CmdConnect, Dst: netx.Addr{IP: netip.MustParseAddr("127.0.0.1"), Port: 80}, UserID: "alice"}},
		{"socks4 empty user id", "\x04\x01\x01\xbb\xc0\x00\x02\x07\x00",
			Request{Cmd: CmdConnect, Dst: netx.Addr{IP: netip.MustParseAddr("192.0.2.7"), Port: 443}}},
		{"socks4a", "\x04\x01\x00\x50\x00\x00\x00\x01bob\x00example.com\x00",
			Request{Cmd: CmdConnect, Dst: netx.DomainAddr("example.com", 80), UserID: "bob"}},
		{"socks4a marker 0.0.0.255", "\x04\x01\x00\x50\x00\x00\x00\xff\x00example.org\x00",
			Request{Cmd: CmdConnect, Dst: netx.DomainAddr("example.org", 80)}},
		{"socks4a IP in text", "\x04\x01\x00\x50\x00\x00\x00\x01\x00::1\x00",
			Request{Cmd: CmdConnect, Dst: netx.Addr{IP: netip.MustParseAddr("::1"), Port: 80}}},
		// 0.0.0.0 is not the SOCKS4a marker: no name follows.
		{"socks4 0.0.0.0", "\x04\x01\x00\x50\x00\x00\x00\x00\x00",
			Request{Cmd: CmdConnect, Dst: netx.Addr{IP: netip.IPv4Unspecified(), Port: 80}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, r := range []io.Reader{strings.NewReader(tt.in), onlyReader{strings.NewReader(tt.in)}} {
				got, err := ReadRequest(r)
				if err != nil || got != tt.want {
					t.Fatalf("ReadRequest = %+v, %v; want %+v", got, err, tt.want)
				}
			}
		})
	}
}

// onlyReader hides every method but Read.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(b []byte) (int, error) { return o.r.Read(b) }

func TestReadRequestErrors(t *testing.T) {
	long := strings.Repeat("a", 256)
	tests := []struct {
		name, in, want string
		is             error
	}{
		{"empty", "", "EOF", nil},
		{"short head", "\x04\x01\x00\x50\x7f", "unexpected EOF", io.ErrUnexpectedEOF},
		{"socks5", "\x05\x01\x00\x01\x7f\x00\x00\x01\x00\x50", "socks4: unsupported version 5", nil},
		{"no NUL after the user id", "\x04\x01\x00\x50\x7f\x00\x00\x01alice", "read user id: unexpected EOF", io.ErrUnexpectedEOF},
		{"user id too long", "\x04\x01\x00\x50\x7f\x00\x00\x01" + long + "\x00", "user id longer than 255 bytes", nil},
		{"no name after 4a marker", "\x04\x01\x00\x50\x00\x00\x00\x01\x00", "read domain name: unexpected EOF", io.ErrUnexpectedEOF},
		{"empty name", "\x04\x01\x00\x50\x00\x00\x00\x01\x00\x00", "empty domain name", nil},
		{"name too long", "\x04\x01\x00\x50\x00\x00\x00\x01\x00" + long + "\x00", "domain name longer than 255 bytes", nil},
		{"name with a space", "\x04\x01\x00\x50\x00\x00\x00\x01\x00a b\x00", "holds byte 0x20", nil},
		{"bind", "\x04\x02\x00\x50\x7f\x00\x00\x01\x00", "command not supported: BIND", ErrCommandNotSupported},
		{"unknown command", "\x04\x09\x00\x50\x7f\x00\x00\x01\x00", "command not supported: 0x09", ErrCommandNotSupported},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadRequest(strings.NewReader(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tt.want)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Fatalf("err = %v, want it to match %v", err, tt.is)
			}
		})
	}
}

// A refused over-long user id is not read to its end: the reader stops at
// the cap, so a client cannot make the server read without bound.
func TestReadRequestStopsAtTheCap(t *testing.T) {
	in := "\x04\x01\x00\x50\x7f\x00\x00\x01" + strings.Repeat("a", 10000)
	r := strings.NewReader(in)
	if _, err := ReadRequest(r); err == nil {
		t.Fatal("an endless user id was accepted")
	}
	if read := len(in) - r.Len(); read > 8+MaxUserIDLen+1 {
		t.Fatalf("read %d bytes of an over-long request", read)
	}
}

// A BIND is parsed whole: its reader is left at the request's end.
func TestBindIsReadWhole(t *testing.T) {
	r := bufio.NewReader(strings.NewReader("\x04\x02\x00\x15\x00\x00\x00\x01me\x00ftp.example\x00next"))
	req, err := ReadRequest(r)
	if !errors.Is(err, ErrCommandNotSupported) || req.Cmd != CmdBind || req.Dst != netx.DomainAddr("ftp.example", 21) || req.UserID != "me" {
		t.Fatalf("ReadRequest = %+v, %v", req, err)
	}
	if rest, _ := io.ReadAll(r); string(rest) != "next" {
		t.Fatalf("left %q after the request", rest)
	}
}

func TestAppendRequest(t *testing.T) {
	tests := []struct {
		name string
		dst  netx.Addr
		id   string
		want string
	}{
		{"ipv4", netx.Addr{IP: netip.MustParseAddr("127.0.0.1"), Port: 80}, "alice", "\x04\x01\x00\x50\x7f\x00\x00\x01alice\x00"},
		{"mapped ipv4", netx.Addr{IP: netip.MustParseAddr("::ffff:10.0.0.1"), Port: 80}, "", "\x04\x01\x00\x50\x0a\x00\x00\x01\x00"},
		{"name", netx.DomainAddr("example.com", 443), "", "\x04\x01\x01\xbb\x00\x00\x00\x01\x00example.com\x00"},
		{"ipv6 as text", netx.Addr{IP: netip.MustParseAddr("::1"), Port: 80}, "", "\x04\x01\x00\x50\x00\x00\x00\x01\x00::1\x00"},
		{"4a marker as text", netx.Addr{IP: netip.MustParseAddr("0.0.0.7"), Port: 80}, "", "\x04\x01\x00\x50\x00\x00\x00\x01\x000.0.0.7\x00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := AppendRequest(nil, CmdConnect, tt.dst, tt.id)
			if err != nil || string(b) != tt.want {
				t.Fatalf("AppendRequest = % x, %v; want % x", b, err, tt.want)
			}
			req, err := ReadRequest(bytes.NewReader(b))
			want := Request{Cmd: CmdConnect, Dst: netx.Addr{IP: tt.dst.IP.Unmap(), Name: tt.dst.Name, Port: tt.dst.Port}, UserID: tt.id}
			if err != nil || req != want {
				t.Fatalf("read back %+v, %v; want %+v", req, err, want)
			}
		})
	}
	for _, bad := range []struct {
		dst netx.Addr
		id  string
	}{
		{netx.Addr{Port: 80}, ""},
		{netx.DomainAddr(strings.Repeat("a", 256), 80), ""},
		{netx.DomainAddr("a\x00b", 80), ""},
		{netx.DomainAddr("a", 80), strings.Repeat("u", 256)},
		{netx.DomainAddr("a", 80), "u\x00"},
	} {
		if b, err := AppendRequest([]byte("x"), CmdConnect, bad.dst, bad.id); err == nil || string(b) != "x" {
			t.Errorf("AppendRequest(%v, %q) = % x, %v; want an error and nothing appended", bad.dst, bad.id, b, err)
		}
	}
}

func TestReply(t *testing.T) {
	tests := []struct {
		bound netip.AddrPort
		want  string
		back  netip.AddrPort
	}{
		{netip.MustParseAddrPort("127.0.0.1:4321"), "\x00\x5a\x10\xe1\x7f\x00\x00\x01", netip.MustParseAddrPort("127.0.0.1:4321")},
		{netip.MustParseAddrPort("[::1]:80"), "\x00\x5a\x00\x50\x00\x00\x00\x00", netip.MustParseAddrPort("0.0.0.0:80")},
		{netip.AddrPort{}, "\x00\x5a\x00\x00\x00\x00\x00\x00", netip.MustParseAddrPort("0.0.0.0:0")},
	}
	for _, tt := range tests {
		b := AppendReply(nil, ReplyGranted, tt.bound)
		if string(b) != tt.want {
			t.Fatalf("AppendReply(%v) = % x, want % x", tt.bound, b, tt.want)
		}
		code, bound, err := ReadReply(bytes.NewReader(b))
		if err != nil || code != ReplyGranted || bound != tt.back {
			t.Fatalf("ReadReply = %#x %v %v", code, bound, err)
		}
	}
	if code, _, err := ReadReply(strings.NewReader("\x00\x5b\x00\x00\x00\x00\x00\x00")); err != nil || code != ReplyRejected {
		t.Fatalf("rejection: %#x, %v", code, err)
	}
	if _, _, err := ReadReply(strings.NewReader("\x04\x5a\x00\x00\x00\x00\x00\x00")); err == nil {
		t.Fatal("a reply of version 4 was accepted")
	}
	if _, _, err := ReadReply(strings.NewReader("\x00\x5a")); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("short reply: %v", err)
	}
	for _, c := range []byte{ReplyGranted, ReplyRejected, ReplyNoIdentd, ReplyUserIDNotAllowed} {
		if ReplyText(c) == ReplyText(0) {
			t.Errorf("reply %#x has no name", c)
		}
	}
}
