package vless

import (
	"net/netip"
	"testing"
)

func mustIP(s string) netip.Addr { return netip.MustParseAddr(s) }

// FuzzResponseLen feeds server bytes to the response header check as a
// client reads them, growing the input as asked. It may not panic, it asks
// for at most a version, a length and 255 bytes of addons, and it accepts
// only version 0.
func FuzzResponseLen(f *testing.F) {
	f.Add([]byte{0, 0})
	f.Add([]byte{0, 2, 0x0a, 0x00})
	f.Add([]byte{1, 0})
	f.Add([]byte{0, 255})
	f.Fuzz(func(t *testing.T, b []byte) {
		have := 0
		for {
			n, err := ResponseLen(b[:have])
			if err != nil {
				if len(b) == 0 || b[0] == Version {
					t.Fatalf("version %d refused: %v", b[0], err)
				}
				return
			}
			if n > 2+255 {
				t.Fatalf("asked for %d bytes", n)
			}
			if n <= have {
				if b[0] != Version {
					t.Fatalf("version %d accepted", b[0])
				}
				return
			}
			if n > len(b) {
				return
			}
			have = n
		}
	})
}

// FuzzPacketLen sizes server packets as a client reads them: never less
// than the length prefix, never past what the prefix says.
func FuzzPacketLen(f *testing.F) {
	f.Add([]byte{0, 2, 'o', 'k'})
	f.Add([]byte{0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := PacketLen(b)
		if err != nil || n < PacketHeaderLen || n > PacketHeaderLen+0xffff {
			t.Fatalf("%d, %v", n, err)
		}
	})
}
