package sniff

import (
	"bytes"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strings"
	"testing"

	"switchyard/route/sniff/snifftest"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var (
	v1 = quicVersionOf(0x00000001)
	v2 = quicVersionOf(0x6b3343cf)
)

var testDCID = []byte{0xde, 0xad, 0xbe, 0xef, 0x01, 0x02, 0x03, 0x04, 0x05}

func TestQUICRFCVectors(t *testing.T) {
	for _, tt := range []struct {
		name string
		v    *quicVersion
		pkt  string
	}{
		{"v1 RFC 9001 A.2", v1, rfc9001ClientInitial},
		{"v2 RFC 9369 A.2", v2, rfc9369ClientInitial},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pkt := unhex(t, tt.pkt)
			orig := bytes.Clone(pkt)
			dcid, ok := QUICInitial(pkt)
			if !ok || !bytes.Equal(dcid, unhex(t, rfcDCID)) {
				t.Fatalf("QUICInitial = %x, %v", dcid, ok)
			}
			name, quic, more := QUIC(pkt)
			if name != "example.com" || !quic || more {
				t.Fatalf("QUIC = %q, %v, %v; want example.com, true, false", name, quic, more)
			}
			if !bytes.Equal(pkt, orig) {
				t.Fatal("QUIC changed the datagram it read")
			}
			// snifftest's sealing reproduces the vector, so the packets the
			// other tests build are protected as a real client's are.
			sealed := snifftest.Initial(t, tt.v.number, unhex(t, rfcDCID), 2, snifftest.Pad(unhex(t, rfcCryptoFrame), 1162))
			if !bytes.Equal(sealed, orig) {
				t.Fatalf("snifftest.Initial does not reproduce the vector:\n%x", sealed)
			}
		})
	}
}

func TestQUICInitialKeys(t *testing.T) {
	// RFC 9001 A.1 and RFC 9369 A.1: the client's key and IV.
	for _, tt := range []struct {
		v       *quicVersion
		key, iv string
	}{
		{v1, "1f369613dd76d5467730efcbe3b1a22d", "fa044b2f42a3fd3b46fb255c"},
		{v2, "8b1a0bc121284290a29e0971b5cd045d", "91f73e2351d8fa91660e909f"},
	} {
		k, ok := newInitialKeys(tt.v, unhex(t, rfcDCID))
		if !ok || hex.EncodeToString(k.iv[:]) != tt.iv {
			t.Fatalf("version %#x: iv %x, want %s", tt.v.number, k.iv, tt.iv)
		}
		initial, _ := hkdf.Extract(sha256.New, unhex(t, rfcDCID), tt.v.salt)
		client, _ := expandLabel(initial, clientInLabel, 32)
		key, _ := expandLabel(client, tt.v.key, 16)
		if hex.EncodeToString(key) != tt.key {
			t.Fatalf("version %#x: key %x, want %s", tt.v.number, key, tt.key)
		}
	}
}

// Chrome with post-quantum key shares sends a ClientHello over two Initial
// packets in two datagrams; the name is only known from both, in either
// order.
func TestQUICClientHelloOverTwoInitials(t *testing.T) {
	for _, v := range []*quicVersion{v1, v2} {
		msg := snifftest.HandshakeMessage(t, "Split.Example.ORG")
		if len(msg) < 1000 {
			t.Fatalf("ClientHello of %d bytes: expected a post-quantum key share", len(msg))
		}
		cut := 40 // inside the random: neither half names the server
		first := snifftest.Initial(t, v.number, testDCID, 0, snifftest.Pad(snifftest.Crypto(0, msg[:cut]), 1162))
		second := snifftest.Initial(t, v.number, testDCID, 1, snifftest.Pad(snifftest.Crypto(cut, msg[cut:]), 1162))
		for _, tt := range []struct {
			name      string
			datagrams [][]byte
			want      string
			more      bool
		}{
			{"first alone", [][]byte{first}, "", true},
			{"second alone", [][]byte{second}, "", true},
			{"both", [][]byte{first, second}, "split.example.org", false},
			{"both, out of order", [][]byte{second, first}, "split.example.org", false},
			{"retransmitted first", [][]byte{first, first, second}, "split.example.org", false},
		} {
			t.Run(tt.name, func(t *testing.T) {
				name, quic, more := QUIC(tt.datagrams...)
				if name != tt.want || !quic || more != tt.more {
					t.Fatalf("version %#x: QUIC = %q, %v, %v; want %q, true, %v", v.number, name, quic, more, tt.want, tt.more)
				}
			})
		}
	}
}

// Several CRYPTO frames per packet, out of order, between PING, PADDING and
// an ACK, as Chrome scatters its ClientHello.
func TestQUICScatteredCryptoFrames(t *testing.T) {
	msg := snifftest.HandshakeMessage(t, "scatter.example.com")
	a, b, c := len(msg)/3, 2*len(msg)/3, len(msg)
	var frames []byte
	frames = append(frames, framePing)
	frames = append(frames, snifftest.Crypto(b, msg[b:c])...)
	frames = append(frames, 0, 0, 0) // PADDING
	frames = append(frames, frameACK, 0x05, 0x00, 0x01, 0x02, 0x01, 0x01)
	frames = append(frames, snifftest.Crypto(0, msg[:a+10])...) // overlaps the next
	frames = append(frames, framePing)
	frames = append(frames, snifftest.Crypto(a, msg[a:b])...)
	pkt := snifftest.Initial(t, snifftest.V1, testDCID, 0, snifftest.Pad(frames, 1500))
	if name, quic, more := QUIC(pkt); name != "scatter.example.com" || !quic || more {
		t.Fatalf("QUIC = %q, %v, %v", name, quic, more)
	}
}

// A frame a client's Initial does not carry before its ClientHello ends the
// walk: what follows it is not read.
func TestQUICUnknownFrameStops(t *testing.T) {
	msg := snifftest.HandshakeMessage(t, "stop.example.com")
	frames := append([]byte{0x1e}, snifftest.Crypto(0, msg)...) // HANDSHAKE_DONE first
	pkt := snifftest.Initial(t, snifftest.V1, testDCID, 0, snifftest.Pad(frames, 1200))
	if name, quic, more := QUIC(pkt); name != "" || !quic || more {
		t.Fatalf("QUIC = %q, %v, %v; want no name from an Initial with no CRYPTO read", name, quic, more)
	}
}

func TestQUICCoalesced(t *testing.T) {
	msg := snifftest.HandshakeMessage(t, "coalesced.example.net")
	cut := 60
	one := snifftest.Initial(t, snifftest.V2, testDCID, 0, snifftest.Crypto(0, msg[:cut]))
	two := snifftest.Initial(t, snifftest.V2, testDCID, 1, snifftest.Pad(snifftest.Crypto(cut, msg[cut:]), 200))
	// A 0-RTT packet after the Initials, as a resuming client coalesces it,
	// then zero bytes padding the datagram.
	zeroRTT := []byte{0xc0 | 0b10<<4, 0x6b, 0x33, 0x43, 0xcf, byte(len(testDCID))}
	zeroRTT = append(zeroRTT, testDCID...)
	zeroRTT = append(zeroRTT, 0, 0x40, 30)
	zeroRTT = append(zeroRTT, make([]byte, 30)...)
	datagram := append(append(append(append([]byte{}, one...), two...), zeroRTT...), make([]byte, 50)...)
	if name, quic, more := QUIC(datagram); name != "coalesced.example.net" || !quic || more {
		t.Fatalf("QUIC = %q, %v, %v", name, quic, more)
	}
	// Another connection's Initial in the same datagram is not read.
	other := snifftest.Initial(t, snifftest.V2, []byte{1, 2, 3, 4, 5, 6, 7, 8}, 1, snifftest.Pad(snifftest.Crypto(cut, msg[cut:]), 200))
	if name, quic, more := QUIC(append(append([]byte{}, one...), other...)); name != "" || !quic || !more {
		t.Fatalf("with another connection's Initial: QUIC = %q, %v, %v", name, quic, more)
	}
}

func TestQUICNoSNI(t *testing.T) {
	pkt := snifftest.Initial(t, snifftest.V1, testDCID, 0, snifftest.Pad(snifftest.Crypto(0, snifftest.HandshakeMessage(t, "")), 1200))
	if name, quic, more := QUIC(pkt); name != "" || !quic || more {
		t.Fatalf("QUIC = %q, %v, %v; want \"\", true, false", name, quic, more)
	}
}

func TestQUICNotSniffed(t *testing.T) {
	vector := unhex(t, rfc9001ClientInitial)
	flipped := bytes.Clone(vector)
	flipped[len(flipped)-1] ^= 1 // the tag no longer verifies
	v1TypeBitsUnderV2 := snifftest.Initial(t, snifftest.V1, testDCID, 0, snifftest.Pad(snifftest.Crypto(0, snifftest.HandshakeMessage(t, "a.example")), 1200))
	binary.BigEndian.PutUint32(v1TypeBitsUnderV2[1:], v2.number) // a v2 Retry's type bits
	unknownVersion := bytes.Clone(vector)
	unknownVersion[4] = 2
	short := bytes.Clone(vector)
	short[0] = 0x40 | short[0]&0x3f
	for _, tt := range []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"one byte", []byte{0xc0}},
		{"tag flipped", flipped},
		{"truncated", vector[:len(vector)-1]},
		{"unknown version", unknownVersion},
		{"v1 type bits under v2", v1TypeBitsUnderV2},
		{"short header", short},
		{"dns query", snifftest.DNSQuery("example.com", 1, 1, false)},
		{"zeros", make([]byte, 1200)},
		{"ones", bytes.Repeat([]byte{0xff}, 1200)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if name, quic, more := QUIC(tt.in); name != "" || quic || more {
				t.Fatalf("QUIC = %q, %v, %v", name, quic, more)
			}
		})
	}
	// Every prefix of a real Initial: no panic, no name, never QUIC.
	for n := range len(vector) {
		if name, quic, _ := QUIC(vector[:n]); name != "" || quic {
			t.Fatalf("prefix %d: %q, %v", n, name, quic)
		}
	}
}

// The reassembly keeps to its bounds: data beyond MaxQUICCrypto is not
// kept, and a ClientHello that claims to be longer names nothing.
func TestQUICBounds(t *testing.T) {
	msg := snifftest.HandshakeMessage(t, "bound.example.com")
	far := snifftest.Initial(t, snifftest.V1, testDCID, 0, snifftest.Pad(snifftest.Crypto(MaxQUICCrypto, msg), 1200))
	if name, quic, more := QUIC(far); name != "" || !quic || !more {
		t.Fatalf("data past the bound: QUIC = %q, %v, %v", name, quic, more)
	}
	huge := bytes.Clone(msg[:40])
	huge[1], huge[2], huge[3] = 0x01, 0x00, 0x00 // 64 KiB of body
	pkt := snifftest.Initial(t, snifftest.V1, testDCID, 0, snifftest.Pad(snifftest.Crypto(0, huge), 1200))
	if name, quic, more := QUIC(pkt); name != "" || !quic || more {
		t.Fatalf("a ClientHello longer than the bound: QUIC = %q, %v, %v", name, quic, more)
	}
	// More than maxCryptoSpans disjoint pieces: the rest is not kept, nothing panics.
	var frames []byte
	for i := range 2 * maxCryptoSpans {
		frames = append(frames, snifftest.Crypto(10+2*i, []byte{1})...)
	}
	frames = append(frames, snifftest.Crypto(0, msg)...)
	pkt = snifftest.Initial(t, snifftest.V1, testDCID, 0, snifftest.Pad(frames, 1200))
	if _, quic, _ := QUIC(pkt); !quic {
		t.Fatal("not QUIC")
	}
	var s cryptoStream
	for i := range 2 * maxCryptoSpans {
		s.add(uint64(10+2*i), []byte{1})
	}
	if len(s.spans) != maxCryptoSpans {
		t.Fatalf("%d spans", len(s.spans))
	}
}

func TestCryptoStreamMerges(t *testing.T) {
	var s cryptoStream
	s.add(10, []byte("klmno"))
	s.add(0, []byte("abc"))
	s.add(5, []byte("fghij"))
	if len(s.spans) != 2 || s.spans[1] != (span{5, 15}) {
		t.Fatalf("spans %v", s.spans)
	}
	s.add(2, []byte("cde"))
	if len(s.spans) != 1 || s.spans[0] != (span{0, 15}) || string(s.data) != "abcdefghijklmno" {
		t.Fatalf("spans %v data %q", s.spans, s.data)
	}
}

func BenchmarkQUIC(b *testing.B) {
	msg := snifftest.HandshakeMessage(b, "www.example.com")
	pkt := snifftest.Initial(b, snifftest.V1, testDCID, 0, snifftest.Pad(snifftest.Crypto(0, msg), 1200))
	b.ReportAllocs()
	for b.Loop() {
		QUIC(pkt)
	}
}
