package vmess

import (
	"crypto/cipher"
	"crypto/sha3"
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"golang.org/x/crypto/chacha20poly1305"
)

// chunkCrypto is one direction's body protection: the AEAD with its chunk
// counter, and the SHAKE128 stream that masks lengths and draws padding.
type chunkCrypto struct {
	aead  cipher.AEAD // nil: the payload travels in clear
	nonce [12]byte    // the body IV's first 12 bytes; the first two count chunks
	count uint16
	shake *sha3.SHAKE // nil: lengths travel in clear
	pad   bool        // each chunk carries padding drawn from shake
	word  [2]byte
}

func newChunkCrypto(s *Session, key, iv [16]byte) chunkCrypto {
	c := chunkCrypto{pad: s.opt&OptionGlobalPadding != 0}
	copy(c.nonce[:], iv[:12])
	switch s.wire {
	case SecurityAES128GCM:
		c.aead = newGCM(key)
	case SecurityChacha20Poly1305:
		k := chachaKey(key[:])
		aead, err := chacha20poly1305.New(k[:])
		if err != nil { // a 32-byte key always makes a cipher
			panic(err)
		}
		c.aead = aead
	}
	if s.opt&OptionChunkMasking != 0 {
		c.shake = sha3.NewSHAKE128()
		c.shake.Write(iv[:])
	}
	return c
}

func (c *chunkCrypto) tagSize() int {
	if c.aead == nil {
		return 0
	}
	return TagSize
}

// next draws the next chunk's padding length, then its length mask, from
// the one SHAKE128 stream.
func (c *chunkCrypto) next() (pad int, mask uint16) {
	if c.shake == nil {
		return 0, 0
	}
	if c.pad {
		c.shake.Read(c.word[:])
		pad = int(binary.BigEndian.Uint16(c.word[:]) % MaxPadding)
	}
	c.shake.Read(c.word[:])
	return pad, binary.BigEndian.Uint16(c.word[:])
}

// nextNonce is the nonce of the next chunk: the IV with the chunk count in
// its first two bytes.
func (c *chunkCrypto) nextNonce() []byte {
	binary.BigEndian.PutUint16(c.nonce[:2], c.count)
	c.count++
	return c.nonce[:]
}

// Encoder frames the client's body: one chunk per Seal.
type Encoder struct {
	c      chunkCrypto
	framed bool
	max    int // the largest payload of one chunk
	rand   io.Reader
	zeros  [MaxPadding]byte
}

// NewEncoder returns the encoder of the request body.
func (s *Session) NewEncoder() *Encoder {
	e := &Encoder{c: newChunkCrypto(s, s.reqKey, s.reqIV), framed: s.Framed(), rand: s.rand}
	e.max = maxPayload(e.c.aead != nil, e.c.pad, s.req.Command == CommandUDP)
	return e
}

// maxPayload is the largest payload of one chunk as the reference client
// sizes it. A sealed stream chunk keeps room for the largest padding its
// options allow (Xray's AuthenticationWriter counts 64 bytes); a datagram's
// chunk fits ChunkSize with the worst padding drawn (Xray's client drops
// one that does not); a clear stream chunk carries ChunkSize bytes after its
// length (Xray's ChunkStreamWriter slices the stream at 8 KiB).
func maxPayload(sealed, pad, datagram bool) int {
	tag := 0
	if sealed {
		tag = TagSize
	}
	switch {
	case datagram && pad:
		return ChunkSize - SizeFieldLen - tag - (MaxPadding - 1)
	case datagram, sealed && !pad:
		return ChunkSize - SizeFieldLen - tag
	case sealed:
		return ChunkSize - SizeFieldLen - tag - MaxPadding
	}
	return ChunkSize
}

// Framed reports whether Seal makes chunks; an unframed body is sent as is.
func (e *Encoder) Framed() bool { return e.framed }

// MaxPayload is the largest payload Seal takes in one chunk: 8,174 bytes
// for a sealed stream without padding and 8,110 with it, 8,192 for a clear
// stream; for a datagram 8,174 sealed, 8,111 sealed and padded, 8,190 in
// clear. An unframed body has no chunks and no bound.
func (e *Encoder) MaxPayload() int {
	if !e.framed {
		return math.MaxInt
	}
	return e.max
}

// Seal appends one chunk carrying payload to dst: the length, the sealed
// payload and the padding. An unframed encoder appends the payload as it is.
// An empty payload is the end of the stream: use SealEnd for it.
func (e *Encoder) Seal(dst, payload []byte) ([]byte, error) {
	if !e.framed {
		return append(dst, payload...), nil
	}
	if len(payload) == 0 {
		return dst, fmt.Errorf("vmess: an empty chunk would end the body")
	}
	if len(payload) > e.max {
		return dst, fmt.Errorf("vmess: chunk payload of %d bytes is longer than %d", len(payload), e.max)
	}
	return e.seal(dst, payload)
}

// SealEnd appends the chunk that ends the body (an empty one). An unframed
// body has none: it ends with the connection's write side.
func (e *Encoder) SealEnd(dst []byte) ([]byte, error) {
	if !e.framed {
		return dst, nil
	}
	return e.seal(dst, nil)
}

func (e *Encoder) seal(dst, payload []byte) ([]byte, error) {
	pad, mask := e.c.next()
	size := uint16(len(payload)+e.c.tagSize()+pad) ^ mask
	dst = binary.BigEndian.AppendUint16(dst, size)
	if e.c.aead != nil {
		dst = e.c.aead.Seal(dst, e.c.nextNonce(), payload, nil)
	} else {
		dst = append(dst, payload...)
	}
	if pad > 0 {
		dst = append(dst, e.zeros[:pad]...)
		if _, err := io.ReadFull(e.rand, dst[len(dst)-pad:]); err != nil {
			return dst, fmt.Errorf("vmess: drawing chunk padding: %w", err)
		}
	}
	return dst, nil
}
