package trojan

import (
	"bytes"
	"encoding/hex"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"switchyard/netx"
	"switchyard/protocol/socks5"
)

func TestNewKey(t *testing.T) {
	// FIPS 180-2 SHA-224 vectors.
	for pw, want := range map[string]string{
		"":    "d14a028c2a3a2bc9476102bb288234c415a2b01f828ea62ac5b3e42f",
		"abc": "23097d223405d8228642a477bda255b32aadbce4bda0b3f7e36c9da7",
	} {
		k := NewKey(pw)
		if string(k[:]) != want {
			t.Fatalf("NewKey(%q) = %s, want %s", pw, k[:], want)
		}
	}
}

func TestRequestVector(t *testing.T) {
	k := NewKey("abc")
	b, err := AppendRequest(nil, &k, CmdConnect, netx.DomainAddr("example.com", 443))
	if err != nil {
		t.Fatal(err)
	}
	want := "23097d223405d8228642a477bda255b32aadbce4bda0b3f7e36c9da7" + "\r\n" + "\x01" + "\x03\x0bexample.com\x01\xbb" + "\r\n"
	if string(b) != want {
		t.Fatalf("request %q\nwant %q", b, want)
	}
	b, err = AppendRequest(nil, &k, CmdUDPAssociate, netx.Addr{IP: netip.IPv4Unspecified()})
	if err != nil {
		t.Fatal(err)
	}
	if got := hex.EncodeToString(b[KeyLen:]); got != "0d0a"+"03"+"0100000000"+"0000"+"0d0a" {
		t.Fatalf("udp request tail %s", got)
	}
	long, _ := AppendRequest(nil, &k, CmdConnect, netx.DomainAddr(strings.Repeat("n", 255), 1))
	if len(long) != RequestHeaderMax {
		t.Fatalf("longest request %d bytes, RequestHeaderMax %d", len(long), RequestHeaderMax)
	}
	if _, err := AppendRequest(nil, &k, 0x02, netx.DomainAddr("a", 1)); err == nil {
		t.Fatal("command 2 encoded")
	}
	if _, err := AppendRequest(nil, &k, CmdConnect, netx.Addr{}); err == nil {
		t.Fatal("empty address encoded")
	}
}

func TestPacketRoundTrip(t *testing.T) {
	peers := []netx.Addr{
		{IP: netip.MustParseAddr("192.0.2.1"), Port: 53},
		{IP: netip.MustParseAddr("2001:db8::1"), Port: 443},
		netx.DomainAddr("dns.example", 853),
		netx.DomainAddr(strings.Repeat("x", 255), 9),
	}
	var p PacketParser
	for _, peer := range peers {
		for _, size := range []int{0, 1, 1400, 0xffff} {
			payload := bytes.Repeat([]byte{byte(size)}, size)
			b, err := AppendPacket([]byte("pre"), peer, payload)
			if err != nil {
				t.Fatal(err)
			}
			b = b[3:]
			for i := 0; i < len(b) && i < 300; i++ {
				if n, err := PacketLen(b[:i]); err != nil || n <= i {
					t.Fatalf("PacketLen of %d bytes = %d, %v", i, n, err)
				}
			}
			if n, err := PacketLen(b); err != nil || n != len(b) {
				t.Fatalf("PacketLen = %d, %v; want %d", n, err, len(b))
			}
			got, pl, err := p.Parse(b)
			if err != nil || got != peer || !bytes.Equal(pl, payload) {
				t.Fatalf("parse %v: %v %d bytes, %v", peer, got, len(pl), err)
			}
		}
	}
	if _, err := AppendPacket(nil, peers[0], make([]byte, 0x10000)); err == nil {
		t.Fatal("65536-byte payload encoded")
	}
}

func TestPacketVector(t *testing.T) {
	b, _ := AppendPacket(nil, netx.Addr{IP: netip.MustParseAddr("1.2.3.4"), Port: 53}, []byte("hi"))
	if got := hex.EncodeToString(b); got != "01010203040035"+"0002"+"0d0a"+"6869" {
		t.Fatalf("packet %s", got)
	}
}

func TestParseErrors(t *testing.T) {
	bad := map[string]string{
		"address type": "0201020304003500000d0a",
		"empty name":   "0300003500000d0a",
		"no CRLF":      "010102030400350000aabb",
		"bad name":     "030109003500000d0a",
		"short":        "01010203040035",
	}
	var p PacketParser
	for name, h := range bad {
		raw, _ := hex.DecodeString(h)
		if _, _, err := p.Parse(raw); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
	raw, _ := hex.DecodeString("0201020304003500000d0a")
	if _, err := PacketLen(raw); !errors.Is(err, socks5.ErrAddressTypeNotSupported) {
		t.Fatalf("address type: %v", err)
	}
}

func TestParseAllocations(t *testing.T) {
	var p PacketParser
	named, _ := AppendPacket(nil, netx.DomainAddr("peer.example", 53), make([]byte, 1200))
	plain, _ := AppendPacket(nil, netx.Addr{IP: netip.MustParseAddr("2001:db8::2"), Port: 53}, make([]byte, 1200))
	p.Parse(named)
	stage := make([]byte, 0, 2048)
	allocs := testing.AllocsPerRun(100, func() {
		p.Parse(named)
		p.Parse(plain)
		AppendPacket(stage[:0], netx.DomainAddr("peer.example", 53), plain[:1000])
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per packet", allocs)
	}
}
