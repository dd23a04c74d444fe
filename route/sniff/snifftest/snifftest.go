// Package snifftest builds what clients send, for tests of the sniffers and
// of what routes by them: a crypto/tls ClientHello, QUIC v1 and v2 Initial
// packets protected as RFC 9001 §5 and RFC 9369 say, and DNS queries. It is
// written apart from route/sniff so that it checks the wire format
// independently.
package snifftest

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"crypto/tls"
	"encoding/binary"
	"io"
	"net"
	"strings"
	"testing"
)

// QUIC versions.
const (
	V1 uint32 = 0x00000001
	V2 uint32 = 0x6b3343cf
)

// ClientHello runs a crypto/tls client (with its default key shares, which
// include a post-quantum one) against a pipe and returns the first record it
// writes: a real ClientHello.
func ClientHello(t testing.TB, serverName string) []byte {
	t.Helper()
	client, server := net.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		conf := &tls.Config{ServerName: serverName, InsecureSkipVerify: serverName == ""}
		tls.Client(client, conf).Handshake() // fails once the pipe closes
		client.Close()
	}()
	defer func() { server.Close(); <-done }()
	head := make([]byte, 5)
	if _, err := io.ReadFull(server, head); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, int(head[3])<<8|int(head[4]))
	if _, err := io.ReadFull(server, body); err != nil {
		t.Fatal(err)
	}
	return append(head, body...)
}

// HandshakeMessage is the ClientHello message of ClientHello without its
// record header: what QUIC carries in CRYPTO frames.
func HandshakeMessage(t testing.TB, serverName string) []byte {
	t.Helper()
	return ClientHello(t, serverName)[5:]
}

// Initial builds a client's Initial packet of version (V1 or V2) for dcid,
// with packet number pn (in 4 bytes), no token, and frames as its payload
// (at least 16 bytes of it, for the header protection sample).
func Initial(t testing.TB, version uint32, dcid []byte, pn uint32, frames []byte) []byte {
	t.Helper()
	salt, labels, initialType := v1Salt, [3]string{"quic key", "quic iv", "quic hp"}, byte(0b00)
	if version == V2 {
		salt, labels, initialType = v2Salt, [3]string{"quicv2 key", "quicv2 iv", "quicv2 hp"}, 0b01
	}
	initial, err := hkdf.Extract(sha256.New, dcid, salt)
	if err != nil {
		t.Fatal(err)
	}
	secret := expand(t, initial, "client in", 32)
	key, iv, hpKey := expand(t, secret, labels[0], 16), expand(t, secret, labels[1], 12), expand(t, secret, labels[2], 16)
	block, _ := aes.NewCipher(key)
	aead, _ := cipher.NewGCM(block)
	hp, _ := aes.NewCipher(hpKey)

	hdr := []byte{0xc0 | initialType<<4 | 0x03}
	hdr = binary.BigEndian.AppendUint32(hdr, version)
	hdr = append(hdr, byte(len(dcid)))
	hdr = append(hdr, dcid...)
	hdr = append(hdr, 0, 0) // no source connection ID, no token
	hdr = AppendVarint(hdr, uint64(4+len(frames)+aead.Overhead()))
	pnOff := len(hdr)
	hdr = binary.BigEndian.AppendUint32(hdr, pn)
	nonce := bytes.Clone(iv)
	for i := range 4 {
		nonce[len(nonce)-1-i] ^= byte(pn >> (8 * i))
	}
	pkt := aead.Seal(bytes.Clone(hdr), nonce, frames, hdr)
	mask := make([]byte, 16)
	hp.Encrypt(mask, pkt[pnOff+4:pnOff+20])
	pkt[0] ^= mask[0] & 0x0f
	for i := range 4 {
		pkt[pnOff+i] ^= mask[1+i]
	}
	return pkt
}

var (
	v1Salt = []byte{0x38, 0x76, 0x2c, 0xf7, 0xf5, 0x59, 0x34, 0xb3, 0x4d, 0x17, 0x9a, 0xe6, 0xa4, 0xc8, 0x0c, 0xad, 0xcc, 0xbb, 0x7f, 0x0a}
	v2Salt = []byte{0x0d, 0xed, 0xe3, 0xde, 0xf7, 0x00, 0xa6, 0xdb, 0x81, 0x93, 0x81, 0xbe, 0x6e, 0x26, 0x9d, 0xcb, 0xf9, 0xbd, 0x2e, 0xd9}
)

// expand is HKDF-Expand-Label with an empty context.
func expand(t testing.TB, secret []byte, label string, n int) []byte {
	t.Helper()
	info := binary.BigEndian.AppendUint16(nil, uint16(n))
	info = append(info, byte(6+len(label)))
	info = append(info, "tls13 "+label...)
	info = append(info, 0)
	out, err := hkdf.Expand(sha256.New, secret, string(info), n)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Crypto encodes a CRYPTO frame.
func Crypto(off int, data []byte) []byte {
	b := AppendVarint([]byte{0x06}, uint64(off))
	b = AppendVarint(b, uint64(len(data)))
	return append(b, data...)
}

// AppendVarint appends v as a QUIC variable-length integer.
func AppendVarint(b []byte, v uint64) []byte {
	switch {
	case v < 1<<6:
		return append(b, byte(v))
	case v < 1<<14:
		return binary.BigEndian.AppendUint16(b, uint16(v)|0x4000)
	case v < 1<<30:
		return binary.BigEndian.AppendUint32(b, uint32(v)|0x8000_0000)
	}
	return binary.BigEndian.AppendUint64(b, v|0xc000_0000_0000_0000)
}

// Pad pads frames with PADDING frames to n bytes, as a client pads its
// Initial.
func Pad(frames []byte, n int) []byte {
	if len(frames) < n {
		frames = append(frames, make([]byte, n-len(frames))...)
	}
	return frames
}

// DNSQuery builds a standard query for name with the given type and class,
// with an OPT record (UDP size 1232 and one option) when opt is set.
func DNSQuery(name string, qtype, qclass uint16, opt bool) []byte {
	b := []byte{0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0}
	if opt {
		b[11] = 1
	}
	for _, label := range strings.Split(strings.TrimSuffix(name, "."), ".") {
		if label == "" {
			continue
		}
		b = append(b, byte(len(label)))
		b = append(b, label...)
	}
	b = append(b, 0)
	b = binary.BigEndian.AppendUint16(b, qtype)
	b = binary.BigEndian.AppendUint16(b, qclass)
	if opt {
		b = append(b, 0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0, 0, 8, 0, 10, 0, 4, 1, 2, 3, 4)
	}
	return b
}
