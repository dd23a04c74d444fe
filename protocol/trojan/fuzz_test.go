package trojan

import (
	"bytes"
	"net/netip"
	"testing"

	"switchyard/netx"
)

// FuzzParsePacket feeds server bytes to the UDP packet decoder the way a
// client reads them: sized by PacketLen, then parsed. Neither may panic, and
// a parsed packet re-encodes to bytes that parse the same.
func FuzzParsePacket(f *testing.F) {
	for _, peer := range []netx.Addr{
		{IP: netip.MustParseAddr("8.8.8.8"), Port: 53},
		{IP: netip.MustParseAddr("2001:db8::53"), Port: 53},
		netx.DomainAddr("one.one.one.one", 53),
	} {
		b, _ := AppendPacket(nil, peer, []byte("reply"))
		f.Add(b)
	}
	f.Add([]byte{3, 0, 0, 53, 0, 0, '\r', '\n'})
	f.Add([]byte{1, 1, 2, 3, 4, 0, 53, 0xff, 0xff, '\r', '\n'})
	f.Fuzz(func(t *testing.T, b []byte) {
		var p PacketParser
		for len(b) > 0 {
			n, err := PacketLen(b)
			if err != nil || n > len(b) {
				return
			}
			peer, payload, err := p.Parse(b[:n])
			if err == nil {
				again, err := AppendPacket(nil, peer, payload)
				if err != nil {
					t.Fatalf("re-encoding %v: %v", peer, err)
				}
				peer2, payload2, err := p.Parse(again)
				if err != nil || peer2 != peer || !bytes.Equal(payload2, payload) {
					t.Fatalf("re-encoded packet: %v %v", peer2, err)
				}
			}
			b = b[n:]
		}
	})
}
