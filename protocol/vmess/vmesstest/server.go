// Package vmesstest is the server side of VMess (AEAD header) for tests: it
// opens a client's request header and body and writes the response. It is
// written apart from package vmess, with crypto/hmac's own nesting for the
// KDF, so that a round trip checks the client against a second reading of
// the format.
package vmesstest

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/md5"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha3"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"hash/fnv"
	"io"
	"net/netip"
	"time"

	"golang.org/x/crypto/chacha20poly1305"

	"switchyard/netx"
)

// KDF is VMess's key derivation: the chain of nested crypto/hmac hashes
// named by path, applied to key.
func KDF(key []byte, path ...string) []byte {
	mac := chain(path)()
	mac.Write(key)
	return mac.Sum(nil)
}

// chain returns the hash function of the KDF after path.
func chain(path []string) func() hash.Hash {
	if len(path) == 0 {
		return func() hash.Hash { return hmac.New(sha256.New, []byte("VMess AEAD KDF")) }
	}
	below := chain(path[:len(path)-1])
	last := []byte(path[len(path)-1])
	return func() hash.Hash { return hmac.New(below, last) }
}

// CmdKey is the command key of a user.
func CmdKey(uuid [16]byte) [16]byte {
	return md5.Sum(append(uuid[:], "c48619fe-8f02-49e0-b9e9-edf763e17e21"...))
}

func gcm(key []byte) cipher.AEAD {
	b, err := aes.NewCipher(key)
	if err != nil {
		panic(err)
	}
	a, err := cipher.NewGCM(b)
	if err != nil {
		panic(err)
	}
	return a
}

// Request is an opened request header.
type Request struct {
	Version  byte
	ReqIV    [16]byte
	ReqKey   [16]byte
	Check    byte
	Options  byte
	Padding  int
	Security byte
	Command  byte
	Dst      netx.Addr
	AuthTime time.Time
}

// ReadRequest reads and opens one sealed request header from r for the user
// with uuid, checking the auth id, both AEADs and the checksum.
func ReadRequest(r io.Reader, uuid [16]byte) (*Request, error) {
	cmdKey := CmdKey(uuid)
	var authID [16]byte
	if _, err := io.ReadFull(r, authID[:]); err != nil {
		return nil, err
	}
	var plainID [16]byte
	aesBlock, _ := aes.NewCipher(KDF(cmdKey[:], "AES Auth ID Encryption")[:16])
	aesBlock.Decrypt(plainID[:], authID[:])
	if crc32.ChecksumIEEE(plainID[:12]) != binary.BigEndian.Uint32(plainID[12:]) {
		return nil, errors.New("auth id does not check")
	}
	var sealedLen [18]byte
	var nonce [8]byte
	if _, err := io.ReadFull(r, sealedLen[:]); err != nil {
		return nil, err
	}
	if _, err := io.ReadFull(r, nonce[:]); err != nil {
		return nil, err
	}
	a, n := string(authID[:]), string(nonce[:])
	l, err := gcm(KDF(cmdKey[:], "VMess Header AEAD Key_Length", a, n)[:16]).
		Open(nil, KDF(cmdKey[:], "VMess Header AEAD Nonce_Length", a, n)[:12], sealedLen[:], authID[:])
	if err != nil {
		return nil, fmt.Errorf("header length: %w", err)
	}
	sealed := make([]byte, int(binary.BigEndian.Uint16(l))+16)
	if _, err := io.ReadFull(r, sealed); err != nil {
		return nil, err
	}
	h, err := gcm(KDF(cmdKey[:], "VMess Header AEAD Key", a, n)[:16]).
		Open(nil, KDF(cmdKey[:], "VMess Header AEAD Nonce", a, n)[:12], sealed, authID[:])
	if err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	if len(h) < 38+4 {
		return nil, errors.New("header too short")
	}
	sum := fnv.New32a()
	sum.Write(h[:len(h)-4])
	if sum.Sum32() != binary.BigEndian.Uint32(h[len(h)-4:]) {
		return nil, errors.New("header checksum")
	}
	req := &Request{Version: h[0], Check: h[33], Options: h[34], Padding: int(h[35] >> 4), Security: h[35] & 0x0f, Command: h[37]}
	req.AuthTime = time.Unix(int64(binary.BigEndian.Uint64(plainID[:8])), 0)
	copy(req.ReqIV[:], h[1:17])
	copy(req.ReqKey[:], h[17:33])
	rest := h[38 : len(h)-4]
	if req.Command != 3 { // the Mux command names no destination
		if rest, err = readDst(req, rest); err != nil {
			return nil, err
		}
	}
	if len(rest) != req.Padding {
		return nil, fmt.Errorf("%d bytes of padding, header says %d", len(rest), req.Padding)
	}
	return req, nil
}

// readDst reads the port-first destination at the start of rest into req
// and returns what follows it.
func readDst(req *Request, rest []byte) ([]byte, error) {
	if len(rest) < 3 {
		return nil, errors.New("short destination")
	}
	port := binary.BigEndian.Uint16(rest)
	rest = rest[2:]
	switch rest[0] {
	case 1:
		if len(rest) < 5 {
			return nil, errors.New("short ipv4")
		}
		req.Dst = netx.Addr{IP: netip.AddrFrom4([4]byte(rest[1:5])), Port: port}
		rest = rest[5:]
	case 3:
		if len(rest) < 17 {
			return nil, errors.New("short ipv6")
		}
		req.Dst = netx.Addr{IP: netip.AddrFrom16([16]byte(rest[1:17])), Port: port}
		rest = rest[17:]
	case 2:
		if len(rest) < 2 || len(rest) < 2+int(rest[1]) {
			return nil, errors.New("short domain")
		}
		req.Dst = netx.Addr{Name: string(rest[2 : 2+int(rest[1])]), Port: port}
		rest = rest[2+int(rest[1]):]
	default:
		return nil, fmt.Errorf("address type %d", rest[0])
	}
	return rest, nil
}

// Body reads or writes one direction's chunks.
type Body struct {
	aead    cipher.AEAD
	iv      [16]byte
	count   uint16
	shake   *sha3.SHAKE
	padding bool
	framed  bool
}

func newBody(req *Request, key, iv [16]byte) *Body {
	b := &Body{iv: iv, padding: req.Options&0x08 != 0, framed: req.Options&0x01 != 0}
	switch req.Security {
	case 3:
		b.aead = gcm(key[:])
	case 4:
		k := md5.Sum(key[:])
		k2 := md5.Sum(k[:])
		b.aead, _ = chacha20poly1305.New(append(k[:], k2[:]...))
	}
	if req.Options&0x04 != 0 {
		b.shake = sha3.NewSHAKE128()
		b.shake.Write(iv[:])
	}
	return b
}

// RequestBody is the reader of the client's body.
func (req *Request) RequestBody() *Body { return newBody(req, req.ReqKey, req.ReqIV) }

// ResponseBody is the writer of the server's body.
func (req *Request) ResponseBody() *Body {
	k, iv := req.responseKeys()
	return newBody(req, k, iv)
}

func (req *Request) responseKeys() (key, iv [16]byte) {
	k := sha256.Sum256(req.ReqKey[:])
	v := sha256.Sum256(req.ReqIV[:])
	copy(key[:], k[:16])
	copy(iv[:], v[:16])
	return key, iv
}

func (b *Body) word() uint16 {
	var w [2]byte
	b.shake.Read(w[:])
	return binary.BigEndian.Uint16(w[:])
}

func (b *Body) nonce() []byte {
	n := make([]byte, 12)
	copy(n, b.iv[:12])
	binary.BigEndian.PutUint16(n, b.count)
	b.count++
	return n
}

// ReadChunk reads one chunk from r and returns its payload, or io.EOF for
// the end chunk. An unframed body returns what one read of r returns.
func (b *Body) ReadChunk(r io.Reader) ([]byte, error) {
	if !b.framed {
		p := make([]byte, 64<<10)
		n, err := r.Read(p)
		return p[:n], err
	}
	var sz [2]byte
	if _, err := io.ReadFull(r, sz[:]); err != nil {
		return nil, err
	}
	pad := 0
	if b.padding {
		pad = int(b.word() % 64)
	}
	size := int(binary.BigEndian.Uint16(sz[:]))
	if b.shake != nil {
		size ^= int(b.word())
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, err
	}
	if size < pad {
		return nil, errors.New("chunk shorter than its padding")
	}
	body = body[:size-pad]
	if b.aead != nil {
		p, err := b.aead.Open(nil, b.nonce(), body, nil)
		if err != nil {
			return nil, err
		}
		body = p
	}
	if len(body) == 0 {
		return nil, io.EOF
	}
	return body, nil
}

// AppendChunk appends one chunk carrying p (the end chunk when p is empty).
// An unframed body appends p as it is.
func (b *Body) AppendChunk(dst, p []byte) []byte {
	if !b.framed {
		return append(dst, p...)
	}
	pad := 0
	if b.padding {
		pad = int(b.word() % 64)
	}
	sealed := p
	if b.aead != nil {
		sealed = b.aead.Seal(nil, b.nonce(), p, nil)
	}
	size := uint16(len(sealed) + pad)
	if b.shake != nil {
		size ^= b.word()
	}
	dst = binary.BigEndian.AppendUint16(dst, size)
	dst = append(dst, sealed...)
	padding := make([]byte, pad)
	rand.Read(padding)
	return append(dst, padding...)
}

// AppendResponseHeader appends the sealed response header echoing check
// (req.Check for a true answer).
func (req *Request) AppendResponseHeader(dst []byte, check byte) []byte {
	key, iv := req.responseKeys()
	l := gcm(KDF(key[:], "AEAD Resp Header Len Key")[:16]).Seal(nil, KDF(iv[:], "AEAD Resp Header Len IV")[:12], []byte{0, 4}, nil)
	h := gcm(KDF(key[:], "AEAD Resp Header Key")[:16]).Seal(nil, KDF(iv[:], "AEAD Resp Header IV")[:12], []byte{check, req.Options, 0, 0}, nil)
	return append(append(dst, l...), h...)
}
