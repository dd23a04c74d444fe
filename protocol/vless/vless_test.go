package vless

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"switchyard/netx"
)

var id = UUID{0xb8, 0x31, 0x38, 0x1d, 0x63, 0x24, 0x4d, 0x53, 0xad, 0x4f, 0x8c, 0xda, 0x48, 0xb3, 0x08, 0x11}

func TestParseUUID(t *testing.T) {
	got, err := ParseUUID("b831381d-6324-4d53-ad4f-8cda48b30811")
	if err != nil || got != id {
		t.Fatalf("%x, %v", got, err)
	}
	if got, err := ParseUUID("B831381D-6324-4D53-AD4F-8CDA48B30811"); err != nil || got != id {
		t.Fatalf("upper case: %x, %v", got, err)
	}
	for _, bad := range []string{"", "b831381d63244d53ad4f8cda48b30811", "b831381d-6324-4d53-ad4f-8cda48b3081", "b831381d-6324-4d53-ad4f_8cda48b30811", "g831381d-6324-4d53-ad4f-8cda48b30811"} {
		if _, err := ParseUUID(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestRequestVectors(t *testing.T) {
	uuid := "b831381d63244d53ad4f8cda48b30811"
	cases := []struct {
		cmd  byte
		to   netx.Addr
		want string
	}{
		{CmdTCP, netx.DomainAddr("example.com", 443), "00" + uuid + "00" + "01" + "01bb" + "02" + "0b" + hex.EncodeToString([]byte("example.com"))},
		{CmdUDP, netx.Addr{IP: mustIP("1.2.3.4"), Port: 53}, "00" + uuid + "00" + "02" + "0035" + "01" + "01020304"},
		{CmdTCP, netx.Addr{IP: mustIP("2001:db8::1"), Port: 80}, "00" + uuid + "00" + "01" + "0050" + "03" + "20010db8000000000000000000000001"},
		{CmdMux, netx.Addr{}, "00" + uuid + "00" + "03"},
	}
	for _, c := range cases {
		b, err := AppendRequest(nil, &id, c.cmd, c.to)
		if err != nil || hex.EncodeToString(b) != c.want {
			t.Fatalf("cmd %d: %x, %v\nwant %s", c.cmd, b, err, c.want)
		}
	}
	long, _ := AppendRequest(nil, &id, CmdTCP, netx.DomainAddr(strings.Repeat("a", 255), 1))
	if len(long) != RequestHeaderMax {
		t.Fatalf("longest request %d bytes, RequestHeaderMax %d", len(long), RequestHeaderMax)
	}
	if _, err := AppendRequest(nil, &id, 0x09, netx.DomainAddr("a", 1)); err == nil {
		t.Fatal("command 9 encoded")
	}
	if _, err := AppendRequest(nil, &id, CmdTCP, netx.Addr{}); err == nil {
		t.Fatal("empty address encoded")
	}
}

func TestResponseLen(t *testing.T) {
	cases := []struct {
		in   []byte
		want int
	}{
		{nil, 2},
		{[]byte{0}, 2},
		{[]byte{0, 0}, 2},
		{[]byte{0, 3, 1}, 5},
		{[]byte{0, 255}, 257},
	}
	for _, c := range cases {
		if n, err := ResponseLen(c.in); err != nil || n != c.want {
			t.Fatalf("%x: %d, %v; want %d", c.in, n, err, c.want)
		}
	}
	if _, err := ResponseLen([]byte{1, 0}); !errors.Is(err, ErrVersion) {
		t.Fatalf("version 1: %v", err)
	}
}

func TestPacketRoundTrip(t *testing.T) {
	for _, size := range []int{0, 1, 1400, 0xffff} {
		payload := bytes.Repeat([]byte{7}, size)
		b, err := AppendPacket(nil, payload)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := PacketLen(b[:1]); err != nil || n != 2 {
			t.Fatalf("short: %d, %v", n, err)
		}
		if n, err := PacketLen(b); err != nil || n != len(b) || !bytes.Equal(b[PacketHeaderLen:n], payload) {
			t.Fatalf("size %d: %d, %v", size, n, err)
		}
	}
	if _, err := AppendPacket(nil, make([]byte, 0x10000)); err == nil {
		t.Fatal("65536-byte payload encoded")
	}
}
