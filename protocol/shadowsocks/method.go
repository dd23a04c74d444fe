// Package shadowsocks is the Shadowsocks wire format for the client side:
// the AEAD construction (SIP004) and Shadowsocks 2022 (SIP022), over TCP and
// UDP. It holds no socket and starts no goroutine: a TCP request is appended
// to a byte slice, the upload is sealed into a caller's buffer, the server's
// half of a stream is opened from an io.Reader, and datagrams are sealed and
// opened in caller buffers.
package shadowsocks

import (
	"crypto/aes"
	"crypto/cipher"
	"fmt"
	"strings"

	"golang.org/x/crypto/chacha20poly1305"
)

// Method is one cipher method.
type Method struct {
	Name   string
	Is2022 bool // a Shadowsocks 2022 method (SIP022); otherwise AEAD (SIP004)
	// KeyLen is the length of the key, of every salt and of every subkey.
	KeyLen int
	chacha bool // ChaCha20-Poly1305; otherwise AES-GCM
}

var methods = []Method{
	{Name: "aes-128-gcm", KeyLen: 16},
	{Name: "aes-256-gcm", KeyLen: 32},
	{Name: "chacha20-ietf-poly1305", KeyLen: 32, chacha: true},
	{Name: "2022-blake3-aes-128-gcm", Is2022: true, KeyLen: 16},
	{Name: "2022-blake3-aes-256-gcm", Is2022: true, KeyLen: 32},
	{Name: "2022-blake3-chacha20-poly1305", Is2022: true, KeyLen: 32, chacha: true},
}

// ParseMethod returns the method named name.
func ParseMethod(name string) (Method, error) {
	names := make([]string, len(methods))
	for i, m := range methods {
		if m.Name == name {
			return m, nil
		}
		names[i] = m.Name
	}
	return Method{}, fmt.Errorf("unknown shadowsocks method %q (expected %s)", name, strings.Join(names, " | "))
}

// Sizes of the wire format.
const (
	// TagLen is the AEAD tag of every sealed chunk and packet.
	TagLen = 16
	// MaxPayloadAEAD is the largest payload of one AEAD chunk (SIP004).
	MaxPayloadAEAD = 0x3FFF
	// MaxPayload2022 is the largest payload of one 2022 chunk (SIP022).
	MaxPayload2022 = 0xFFFF
	// RecordOverhead is what one chunk adds to its payload: the sealed
	// two-byte length with its tag, and the payload's tag.
	RecordOverhead = 2 + TagLen + TagLen
)

// Client runtime buffers: each TCP flow reads the server's chunks into one
// buffer of BufSize bytes and stages its sealed upload in another.
const (
	// BufAEAD (SS_BUF) holds the salt and one chunk of MaxPayloadAEAD with
	// its overhead, with room to spare.
	BufAEAD = 20480
	// Buf2022 (SS2022_BUF) is the largest 2022 record: MaxPayload2022 plus
	// RecordOverhead.
	Buf2022 = MaxPayload2022 + RecordOverhead
)

// BufSize is the client runtime buffer of a TCP flow with this method.
func (m Method) BufSize() int {
	if m.Is2022 {
		return Buf2022
	}
	return BufAEAD
}

// maxPayload is the largest payload of one chunk.
func (m Method) maxPayload() int {
	if m.Is2022 {
		return MaxPayload2022
	}
	return MaxPayloadAEAD
}

// newAEAD returns the method's AEAD under key.
func (m Method) newAEAD(key []byte) (cipher.AEAD, error) {
	if m.chacha {
		return chacha20poly1305.New(key)
	}
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}
