package shadowsocks

import (
	"crypto/aes"
	"crypto/rand"
	"encoding/binary"
	mrand "math/rand/v2"

	"switchyard/netx"
)

// SIP022 header types and request padding.
const (
	headerClient = 0
	headerServer = 1
	// MaxPadding is the most padding a 2022 request without initial payload
	// carries; it carries at least one byte.
	MaxPadding = 900
	// requestFixedLen is the 2022 request's fixed header: type, timestamp,
	// variable header length.
	requestFixedLen = 1 + 8 + 2
)

// Response is what the server's half of one TCP session must match: the
// cipher and, for 2022, the salt of the request it answers.
type Response struct {
	c       *Cipher
	reqSalt [32]byte
}

// Request opens one TCP session toward target. It appends the request to
// dst — the salt, the identity headers, and the target address sealed as the
// first chunk (AEAD) or as the 2022 fixed and variable headers with padding —
// and returns the Sealer that seals the rest of the upload and the Response
// the download must match. The request carries no payload: a proxy dial
// sends it on its own.
func (c *Cipher) Request(dst []byte, target netx.Addr) ([]byte, *Sealer, Response, error) {
	alen, err := addrLen(target)
	if err != nil {
		return dst, nil, Response{}, err
	}
	resp := Response{c: c}
	salt := resp.reqSalt[:c.m.KeyLen]
	rand.Read(salt)
	dst = append(dst, salt...)
	if !c.m.Is2022 {
		subkey, err := aeadSubkey(c.key, salt)
		if err != nil {
			return dst, nil, Response{}, err
		}
		aead, err := c.m.newAEAD(subkey)
		if err != nil {
			return dst, nil, Response{}, err
		}
		s := &Sealer{aead: aead, max: c.m.maxPayload()}
		var addr [MaxAddrLen]byte
		dst, _ = s.Seal(growCap(dst, alen+RecordOverhead), addr[:putAddr(addr[:], target)])
		return dst, s, resp, nil
	}
	if dst, err = c.appendIdentityHeaders(dst, salt); err != nil {
		return dst, nil, Response{}, err
	}
	aead, err := c.m.newAEAD(sessionSubkey(c.key, salt))
	if err != nil {
		return dst, nil, Response{}, err
	}
	s := &Sealer{aead: aead, max: c.m.maxPayload()}
	pad := 1 + mrand.IntN(MaxPadding)
	varLen := alen + 2 + pad
	var fixed [requestFixedLen]byte
	fixed[0] = headerClient
	binary.BigEndian.PutUint64(fixed[1:], uint64(c.now().Unix()))
	binary.BigEndian.PutUint16(fixed[9:], uint16(varLen))
	dst = s.seal(growCap(dst, requestFixedLen+TagLen), fixed[:])
	vh := make([]byte, varLen, varLen+TagLen)
	n := putAddr(vh, target)
	binary.BigEndian.PutUint16(vh[n:], uint16(pad)) // the padding itself is zeros
	dst = s.seal(growCap(dst, varLen+TagLen), vh)
	return dst, s, resp, nil
}

// appendIdentityHeaders appends one identity header per identity PSK: the
// hash of the next PSK, AES-encrypted under the identity subkey of the PSK
// and the request salt.
func (c *Cipher) appendIdentityHeaders(dst, salt []byte) ([]byte, error) {
	subkey := make([]byte, c.m.KeyLen)
	for i := range c.identityHeaders() {
		deriveKey(subkey, identityContext, c.psks[i], salt)
		b, err := aes.NewCipher(subkey)
		if err != nil {
			return dst, err
		}
		at := len(dst)
		dst = append(dst, make([]byte, aes.BlockSize)...)
		b.Encrypt(dst[at:], c.hashes[i+1][:])
	}
	return dst, nil
}

// growCap returns b with room for n more bytes.
func growCap(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b
	}
	nb := make([]byte, len(b), len(b)+n)
	copy(nb, b)
	return nb
}
