package sniff

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
)

// Bounds of the QUIC sniffer (see the package doc).
const (
	// MaxQUICCrypto bounds the CRYPTO stream reassembled from Initial
	// packets: data past this offset is not kept, and a ClientHello longer
	// than it names no domain.
	MaxQUICCrypto = 64 << 10
	// MaxQUICInitials bounds the Initial packets one call decrypts.
	MaxQUICInitials = 16
	// maxCryptoSpans bounds the disjoint pieces of the CRYPTO stream kept
	// while frames arrive out of order.
	maxCryptoSpans = 64
	// maxConnIDLen is the longest connection ID QUIC v1 and v2 allow.
	maxConnIDLen = 20
)

// QUIC frame types a client's Initial packet carries.
const (
	framePadding = 0x00
	framePing    = 0x01
	frameACK     = 0x02
	frameACKECN  = 0x03
	frameCrypto  = 0x06
)

// quicVersion is what differs between QUIC v1 (RFC 9001) and v2 (RFC 9369)
// for a client's Initial packets.
type quicVersion struct {
	number      uint32
	initial     byte // the long-header packet type of an Initial
	retry       byte // the long-header packet type of a Retry (no Length field)
	salt        []byte
	key, iv, hp string // HKDF labels of the packet protection keys
}

// clientInLabel derives the client's Initial secret in both versions.
const clientInLabel = "client in"

var quicVersions = [...]quicVersion{
	{
		number: 0x00000001, initial: 0b00, retry: 0b11,
		salt: []byte{0x38, 0x76, 0x2c, 0xf7, 0xf5, 0x59, 0x34, 0xb3, 0x4d, 0x17,
			0x9a, 0xe6, 0xa4, 0xc8, 0x0c, 0xad, 0xcc, 0xbb, 0x7f, 0x0a},
		key: "quic key", iv: "quic iv", hp: "quic hp",
	},
	{
		number: 0x6b3343cf, initial: 0b01, retry: 0b00,
		salt: []byte{0x0d, 0xed, 0xe3, 0xde, 0xf7, 0x00, 0xa6, 0xdb, 0x81, 0x93,
			0x81, 0xbe, 0x6e, 0x26, 0x9d, 0xcb, 0xf9, 0xbd, 0x2e, 0xd9},
		key: "quicv2 key", iv: "quicv2 iv", hp: "quicv2 hp",
	},
}

func quicVersionOf(number uint32) *quicVersion {
	for i := range quicVersions {
		if quicVersions[i].number == number {
			return &quicVersions[i]
		}
	}
	return nil
}

// QUICInitial reports whether datagram starts with the long header of a QUIC
// v1 or v2 Initial packet and returns its Destination Connection ID (part of
// datagram). It reads the header only: it is the cheap test to make before
// QUIC.
func QUICInitial(datagram []byte) (dcid []byte, ok bool) {
	h, ok := parseLong(datagram)
	if !ok || h.typ != h.v.initial {
		return nil, false
	}
	return h.dcid, true
}

// QUIC reads the TLS ClientHello a QUIC client sends in its Initial packets
// and returns its server name, lowercased and without a trailing dot.
// datagrams are the client's datagrams in the order they were sent, each
// possibly holding several coalesced packets; the Initial packets of the
// connection of the first Initial (same version and Destination Connection
// ID) are decrypted, and their CRYPTO frames placed by offset, in whatever
// order and packet they came.
//
// quic is true when at least one Initial packet decrypted: the datagrams are
// a QUIC client's. more is then true when the ClientHello is not whole yet
// and its server name not read: more Initial packets of the connection could
// tell it. A whole ClientHello without a server name gives quic true, more
// false and an empty name.
func QUIC(datagrams ...[]byte) (name string, quic, more bool) {
	var (
		ref    longHeader // the first Initial
		keys   *initialKeys
		stream cryptoStream
		buf    []byte
		tried  int
	)
	for _, d := range datagrams {
		for len(d) > 0 && tried < MaxQUICInitials {
			h, ok := parseLong(d)
			if !ok {
				break // a short header, padding or garbage: nothing more to read
			}
			pkt := d[:h.end]
			d = d[h.end:]
			if h.typ != h.v.initial {
				continue // 0-RTT or Handshake, coalesced after the Initial
			}
			if keys == nil {
				ref = h
				if keys, ok = newInitialKeys(h.v, h.dcid); !ok {
					return "", false, false
				}
			} else if h.v != ref.v || !bytes.Equal(h.dcid, ref.dcid) {
				continue // another connection's
			}
			tried++
			var frames []byte
			if frames, ok = keys.open(pkt, h.pnOff, &buf); !ok {
				continue
			}
			quic = true
			stream.frames(frames)
		}
	}
	if !quic {
		return "", false, false
	}
	name, more = stream.hello()
	return name, true, more
}

// longHeader is the header of one long-header packet.
type longHeader struct {
	v     *quicVersion
	typ   byte   // the packet type bits
	dcid  []byte // the Destination Connection ID
	pnOff int    // the offset of the (protected) packet number
	end   int    // the offset of the packet's end: the next coalesced packet
}

// parseLong parses the long header of the packet at the start of b: ok is
// false unless it is a long header of QUIC v1 or v2 (not a Retry) whose
// packet lies whole in b.
func parseLong(b []byte) (h longHeader, ok bool) {
	if len(b) < 7 || b[0]&0xc0 != 0xc0 {
		return h, false // not a long header with its fixed bit
	}
	if h.v = quicVersionOf(binary.BigEndian.Uint32(b[1:5])); h.v == nil {
		return h, false
	}
	h.typ = b[0] >> 4 & 0b11
	if h.typ == h.v.retry {
		return h, false
	}
	i := 5
	dl := int(b[i])
	i++
	if dl > maxConnIDLen || i+dl >= len(b) {
		return h, false
	}
	h.dcid = b[i : i+dl : i+dl]
	i += dl
	sl := int(b[i])
	i++
	if sl > maxConnIDLen || i+sl > len(b) {
		return h, false
	}
	i += sl
	if h.typ == h.v.initial {
		tl, n := varint(b[i:])
		if n == 0 || tl > uint64(len(b)-i-n) {
			return h, false
		}
		i += n + int(tl) // the token
	}
	length, n := varint(b[i:])
	if n == 0 || length > uint64(len(b)-i-n) {
		return h, false
	}
	h.pnOff = i + n
	h.end = h.pnOff + int(length)
	return h, true
}

// varint reads a QUIC variable-length integer; n is 0 when b is too short.
func varint(b []byte) (v uint64, n int) {
	if len(b) == 0 {
		return 0, 0
	}
	n = 1 << (b[0] >> 6)
	if len(b) < n {
		return 0, 0
	}
	v = uint64(b[0] & 0x3f)
	for _, c := range b[1:n] {
		v = v<<8 | uint64(c)
	}
	return v, n
}

// initialKeys protect a client's Initial packets.
type initialKeys struct {
	aead cipher.AEAD
	hp   cipher.Block
	iv   [12]byte
}

// newInitialKeys derives the client's Initial keys from the Destination
// Connection ID of its first Initial packet (RFC 9001 §5.2, RFC 9369 §3.3).
func newInitialKeys(v *quicVersion, dcid []byte) (*initialKeys, bool) {
	initial, err := hkdf.Extract(sha256.New, dcid, v.salt)
	if err != nil {
		return nil, false
	}
	client, err1 := expandLabel(initial, clientInLabel, sha256.Size)
	key, err2 := expandLabel(client, v.key, 16)
	iv, err3 := expandLabel(client, v.iv, 12)
	hpKey, err4 := expandLabel(client, v.hp, 16)
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil {
		return nil, false
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, false
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, false
	}
	hp, err := aes.NewCipher(hpKey)
	if err != nil {
		return nil, false
	}
	k := &initialKeys{aead: aead, hp: hp}
	copy(k.iv[:], iv)
	return k, true
}

// expandLabel is TLS 1.3's HKDF-Expand-Label with an empty context.
func expandLabel(secret []byte, label string, length int) ([]byte, error) {
	info := make([]byte, 0, 4+len("tls13 ")+len(label))
	info = binary.BigEndian.AppendUint16(info, uint16(length))
	info = append(info, byte(len("tls13 ")+len(label)))
	info = append(info, "tls13 "...)
	info = append(info, label...)
	info = append(info, 0)
	return hkdf.Expand(sha256.New, secret, string(info), length)
}

// open removes the header protection of the Initial packet pkt, whose packet
// number starts at pnOff, and decrypts its payload. It works on a copy in
// *buf (grown as needed) and returns the plaintext frames, part of *buf.
func (k *initialKeys) open(pkt []byte, pnOff int, buf *[]byte) ([]byte, bool) {
	const sampleLen = 16
	if pnOff+4+sampleLen > len(pkt) {
		return nil, false
	}
	var mask [sampleLen]byte
	k.hp.Encrypt(mask[:], pkt[pnOff+4:pnOff+4+sampleLen])
	b := append((*buf)[:0], pkt...)
	*buf = b
	b[0] ^= mask[0] & 0x0f
	pnLen := int(b[0]&0x03) + 1
	var pn uint64
	for i := range pnLen {
		b[pnOff+i] ^= mask[1+i]
		pn = pn<<8 | uint64(b[pnOff+i])
	}
	// The first packets of a connection: the truncated packet number is the
	// whole one.
	nonce := k.iv
	for i := range 8 {
		nonce[len(nonce)-1-i] ^= byte(pn >> (8 * i))
	}
	hdr := pnOff + pnLen
	if len(b)-hdr < k.aead.Overhead() {
		return nil, false
	}
	plain, err := k.aead.Open(b[hdr:hdr], nonce[:], b[hdr:], b[:hdr])
	return plain, err == nil
}

// cryptoStream reassembles the CRYPTO stream of Initial packets by offset,
// up to MaxQUICCrypto bytes in at most maxCryptoSpans disjoint pieces.
type cryptoStream struct {
	data  []byte // data[i] is the byte at offset i, where a span holds it
	spans []span // sorted, disjoint and not adjacent
	seen  bool   // a CRYPTO frame was read
}

type span struct{ lo, hi int }

// frames reads the frames of a decrypted Initial payload, keeping CRYPTO
// data. It stops at the first frame that is not PADDING, PING, ACK or
// CRYPTO, or that is cut.
func (s *cryptoStream) frames(p []byte) {
	for len(p) > 0 {
		switch p[0] {
		case framePadding, framePing:
			p = p[1:]
		case frameACK, frameACKECN:
			n := ackLen(p)
			if n == 0 {
				return
			}
			p = p[n:]
		case frameCrypto:
			off, n1 := varint(p[1:])
			if n1 == 0 {
				return
			}
			length, n2 := varint(p[1+n1:])
			i := 1 + n1 + n2
			if n2 == 0 || length > uint64(len(p)-i) {
				return
			}
			s.add(off, p[i:i+int(length)])
			p = p[i+int(length):]
		default:
			return
		}
	}
}

// ackLen returns the length of the ACK frame at the start of p, or 0 when it
// is cut.
func ackLen(p []byte) int {
	i := 1
	field := func() (uint64, bool) {
		v, n := varint(p[i:])
		i += n
		return v, n > 0
	}
	if _, ok := field(); !ok { // largest acknowledged
		return 0
	}
	if _, ok := field(); !ok { // ACK delay
		return 0
	}
	ranges, ok := field()
	if !ok {
		return 0
	}
	if _, ok := field(); !ok { // first ACK range
		return 0
	}
	// Each further range is two varints of at least a byte each: a count
	// beyond what p holds is cut.
	if ranges > uint64(len(p)-i)/2 {
		return 0
	}
	for range 2 * ranges {
		if _, ok := field(); !ok {
			return 0
		}
	}
	if p[0] == frameACKECN {
		for range 3 {
			if _, ok := field(); !ok {
				return 0
			}
		}
	}
	return i
}

// add places CRYPTO data b at offset off; what lies past MaxQUICCrypto is
// dropped.
func (s *cryptoStream) add(off uint64, b []byte) {
	s.seen = true
	if off >= MaxQUICCrypto || len(b) == 0 {
		return
	}
	lo := int(off)
	if len(b) > MaxQUICCrypto-lo {
		b = b[:MaxQUICCrypto-lo]
	}
	hi := lo + len(b)
	if !s.mark(lo, hi) {
		return
	}
	if hi > len(s.data) {
		s.data = append(s.data, make([]byte, hi-len(s.data))...)
	}
	copy(s.data[lo:hi], b)
}

// mark records that [lo, hi) is held, merging it with the spans it touches.
// It is false when that would make more than maxCryptoSpans spans.
func (s *cryptoStream) mark(lo, hi int) bool {
	i := 0
	for i < len(s.spans) && s.spans[i].hi < lo {
		i++
	}
	j := i
	for j < len(s.spans) && s.spans[j].lo <= hi {
		lo, hi = min(lo, s.spans[j].lo), max(hi, s.spans[j].hi)
		j++
	}
	if i == j {
		if len(s.spans) >= maxCryptoSpans {
			return false
		}
		s.spans = append(s.spans, span{})
		copy(s.spans[i+1:], s.spans[i:])
		s.spans[i] = span{lo, hi}
		return true
	}
	s.spans[i] = span{lo, hi}
	s.spans = append(s.spans[:i+1], s.spans[j:]...)
	return true
}

// hello reads the server name from the ClientHello at the start of the
// stream, as much of it as has arrived without a gap. more is true when the
// name is not known yet and more data could tell it.
func (s *cryptoStream) hello() (name string, more bool) {
	if !s.seen {
		return "", false // an Initial with no CRYPTO frame
	}
	var msg []byte
	if len(s.spans) > 0 && s.spans[0].lo == 0 {
		msg = s.data[:s.spans[0].hi]
	}
	if len(msg) > 0 && msg[0] != handshakeClientHello {
		return "", false
	}
	if len(msg) < 4 {
		return "", true
	}
	msgLen := int(msg[1])<<16 | int(msg[2])<<8 | int(msg[3])
	if 4+msgLen > MaxQUICCrypto {
		return "", false // could never be whole
	}
	body, complete := msg[4:], false
	if len(body) >= msgLen {
		body, complete = body[:msgLen], true
	}
	switch name, r := helloSNI(body, complete); r {
	case found:
		return name, false
	case incomplete:
		return "", true
	}
	return "", false
}
