package mux

import (
	"bytes"
	"encoding/hex"
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"switchyard/netx"
)

func ip(s string, port uint16) netx.Addr {
	return netx.Addr{IP: netip.MustParseAddr(s), Port: port}
}

func TestFrameRoundTrip(t *testing.T) {
	frames := []Frame{
		{Session: 0, Status: StatusNew, Option: OptionData, Network: NetworkUDP, Target: ip("1.2.3.4", 53), GlobalID: [8]byte{1, 2, 3, 4, 5, 6, 7, 8}, Data: []byte("hello")},
		{Session: 7, Status: StatusNew, Option: 0, Network: NetworkTCP, Target: netx.DomainAddr("example.com", 443)},
		{Session: 0, Status: StatusKeep, Option: OptionData, Network: NetworkUDP, Target: ip("2001:db8::1", 5353), Data: []byte{}},
		{Session: 3, Status: StatusKeep, Option: OptionData, Data: bytes.Repeat([]byte{0xaa}, 9000)},
		{Session: 3, Status: StatusEnd, Option: OptionError},
		{Session: 0, Status: StatusKeepAlive},
		{Session: 1, Status: StatusNew, Option: OptionData, Network: NetworkUDP, Target: netx.DomainAddr(strings.Repeat("a", 255), 1), Data: []byte("x")},
	}
	var p Parser
	for _, f := range frames {
		b, err := AppendFrame([]byte("prefix"), &f)
		if err != nil {
			t.Fatalf("%+v: %v", f, err)
		}
		if string(b[:6]) != "prefix" {
			t.Fatal("prefix overwritten")
		}
		b = b[6:]
		for i := 0; i < len(b); i++ { // every prefix asks for more
			if n, err := FrameLen(b[:i]); err != nil || n <= i {
				t.Fatalf("%v: FrameLen of %d bytes = %d, %v", f.Status, i, n, err)
			}
		}
		if n, err := FrameLen(b); err != nil || n != len(b) {
			t.Fatalf("FrameLen = %d, %v, want %d", n, err, len(b))
		}
		got, err := p.Parse(b)
		if err != nil {
			t.Fatalf("%v: %v", f.Status, err)
		}
		if f.Option&OptionData == 0 {
			f.Data = nil
		}
		if !reflect.DeepEqual(got, f) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, f)
		}
	}
}

// The bytes Xray's XUDP client writes for a first packet and its server
// writes for a reply.
func TestFrameVectors(t *testing.T) {
	newFrame := "0014" + "0000" + "01" + "01" + "02" + "0035" + "01" + "01020304" + "0102030405060708" + "0002" + "6869"
	b, err := AppendFrame(nil, &Frame{Status: StatusNew, Option: OptionData, Network: NetworkUDP, Target: ip("1.2.3.4", 53), GlobalID: [8]byte{1, 2, 3, 4, 5, 6, 7, 8}, Data: []byte("hi")})
	if err != nil || hex.EncodeToString(b) != newFrame {
		t.Fatalf("new frame %x, %v\nwant %s", b, err, newFrame)
	}
	keep := "000c" + "0000" + "02" + "01" + "02" + "01bb" + "02" + "03" + "612e62" + "0001" + "7a"
	b, err = AppendFrame(nil, &Frame{Status: StatusKeep, Option: OptionData, Network: NetworkUDP, Target: netx.DomainAddr("a.b", 443), Data: []byte("z")})
	if err != nil || hex.EncodeToString(b) != keep {
		t.Fatalf("keep frame %x, %v\nwant %s", b, err, keep)
	}
	// A reply with padding after the address, and one without an address.
	raw, _ := hex.DecodeString("000e" + "0000" + "02" + "01" + "02" + "0035" + "01" + "08080808" + "0000" + "0002" + "6f6b")
	var p Parser
	f, err := p.Parse(raw)
	if err != nil || f.Target != ip("8.8.8.8", 53) || string(f.Data) != "ok" {
		t.Fatalf("padded keep: %+v, %v", f, err)
	}
	raw, _ = hex.DecodeString("0004" + "0000" + "02" + "01" + "0003" + "616263")
	if f, err = p.Parse(raw); err != nil || f.Network != 0 || string(f.Data) != "abc" {
		t.Fatalf("bare keep: %+v, %v", f, err)
	}
}

func TestFrameErrors(t *testing.T) {
	bad := map[string]string{
		"short metadata":   "0003000002",
		"long metadata":    "0201",
		"unknown status":   "000400000900",
		"unknown network":  "0008000001000300350101",
		"new without addr": "000400000100",
		"addr type":        "00080000010002003509",
		"cut address":      "000800000100020035020a",
		"empty name":       "00080000010002003502000000",
		"control in name":  "000a0000010002003502026109",
		"trailing bytes":   "00040000020000",
	}
	var p Parser
	for name, h := range bad {
		raw, _ := hex.DecodeString(h)
		if _, err := p.Parse(raw); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
	if _, err := p.Parse([]byte{0, 4, 0, 0, 9, 0}); !errors.Is(err, ErrStatus) {
		t.Fatalf("status: %v", err)
	}
	if _, err := AppendFrame(nil, &Frame{Status: StatusNew}); err == nil {
		t.Fatal("new frame without a network")
	}
	if _, err := AppendFrame(nil, &Frame{Status: StatusEnd, Network: NetworkUDP}); err == nil {
		t.Fatal("end frame with a target")
	}
	if _, err := AppendFrame(nil, &Frame{Status: StatusKeep, Option: OptionData, Data: make([]byte, 70000)}); err == nil {
		t.Fatal("data over 65535 bytes")
	}
	if _, err := AppendFrame(nil, &Frame{Status: StatusNew, Network: NetworkUDP, Target: netx.DomainAddr(strings.Repeat("a", 256), 1)}); err == nil {
		t.Fatal("name over 255 bytes")
	}
}

func TestParseIPTextName(t *testing.T) {
	b, _ := AppendFrame(nil, &Frame{Status: StatusKeep, Option: OptionData, Network: NetworkUDP, Target: netx.DomainAddr("10.0.0.1", 9), Data: []byte("x")})
	var p Parser
	f, err := p.Parse(b)
	if err != nil || f.Target != ip("10.0.0.1", 9) {
		t.Fatalf("%+v, %v", f.Target, err)
	}
}

func TestParseAllocations(t *testing.T) {
	var p Parser
	named, _ := AppendFrame(nil, &Frame{Status: StatusKeep, Option: OptionData, Network: NetworkUDP, Target: netx.DomainAddr("peer.example", 53), Data: make([]byte, 1200)})
	plain, _ := AppendFrame(nil, &Frame{Status: StatusKeep, Option: OptionData, Network: NetworkUDP, Target: ip("2001:db8::7", 53), Data: make([]byte, 1200)})
	p.Parse(named)
	stage := make([]byte, 0, 2048)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := p.Parse(named); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Parse(plain); err != nil {
			t.Fatal(err)
		}
		f := Frame{Status: StatusKeep, Option: OptionData, Network: NetworkUDP, Target: netx.DomainAddr("peer.example", 53), Data: plain[:100]}
		if _, err := AppendFrame(stage[:0], &f); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per frame", allocs)
	}
}

func TestGlobalID(t *testing.T) {
	var k1, k2 [GlobalIDKeyLen]byte
	k2[0] = 1
	a := netip.MustParseAddrPort("127.0.0.1:5000")
	b := netip.MustParseAddrPort("127.0.0.1:5001")
	if id1, id2 := GlobalID(&k1, a), GlobalID(&k1, netip.MustParseAddrPort("127.0.0.1:5000")); id1 != id2 {
		t.Fatal("one source, two IDs")
	}
	if GlobalID(&k1, a) == GlobalID(&k1, b) || GlobalID(&k1, a) == GlobalID(&k2, a) {
		t.Fatal("IDs collide across sources or keys")
	}
	if GlobalID(&k1, a) == [8]byte{} {
		t.Fatal("zero ID")
	}
}
