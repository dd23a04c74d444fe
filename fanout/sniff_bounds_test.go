package fanout

import (
	"net/netip"
	"testing"

	"switchyard/netx"
	"switchyard/route/sniff/snifftest"
)

// The sniffer's tables keep to their bounds whatever a client sends.
func TestSnifferBounds(t *testing.T) {
	msg := snifftest.HandshakeMessage(t, "bound.example")
	partial := func(i int) []byte {
		dcid := []byte{byte(i >> 8), byte(i), 1, 2, 3, 4, 5, 6}
		return snifftest.Initial(t, snifftest.V1, dcid, 0, snifftest.Pad(snifftest.Crypto(0, msg[:40]), 1200))
	}
	whole := func(i int) []byte {
		dcid := []byte{byte(i >> 8), byte(i), 9, 9, 9, 9, 9, 9}
		return snifftest.Initial(t, snifftest.V1, dcid, 0, snifftest.Pad(snifftest.Crypto(0, msg), 1200))
	}
	dst := func(i int) netx.Addr {
		return netx.AddrFromAddrPort(netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), 443))
	}
	sn := newSniffer()
	// Connections that never complete their ClientHello: at most maxPending
	// wait, the oldest is dropped to make room.
	for i := range 3 * maxPending {
		if v := sn.packet(partial(i), dst(i)); !v.hold {
			t.Fatalf("connection %d: partial Initial not held", i)
		}
		if sn.pending > maxPending || sn.heldBytes > maxHeldBytes {
			t.Fatalf("connection %d: %d pending, %d bytes held", i, sn.pending, sn.heldBytes)
		}
	}
	if sn.pending != maxPending || sn.heldBytes != maxPending*len(partial(0)) {
		t.Fatalf("%d pending, %d bytes held", sn.pending, sn.heldBytes)
	}
	// Whole connections: the table stays at maxQUICConns, pending ones kept.
	for i := range 2 * maxQUICConns {
		if v := sn.packet(whole(i), dst(1000+i)); v.hold || v.s.domain != "bound.example" {
			t.Fatalf("connection %d: %+v", i, v)
		}
		if len(sn.conns) > maxQUICConns {
			t.Fatalf("%d connections remembered", len(sn.conns))
		}
	}
	if sn.pending != maxPending {
		t.Fatalf("%d pending after the table filled", sn.pending)
	}
	// The most recent connections are remembered, the oldest forgotten.
	short := []byte{0x40, 1, 2, 3}
	if v := sn.packet(short, dst(1000+2*maxQUICConns-1)); v.s.domain != "bound.example" {
		t.Fatalf("the last connection was forgotten: %+v", v)
	}
	if v := sn.packet(short, dst(1000)); v.s != (sniffed{}) {
		t.Fatalf("the oldest connection is still remembered: %+v", v)
	}
}
