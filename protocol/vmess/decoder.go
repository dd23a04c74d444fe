package vmess

import (
	"encoding/binary"
	"fmt"
	"io"
)

type decodeState uint8

const (
	stateHeader decodeState = iota // the response header
	stateChunk                     // body chunks
	stateRaw                       // an unframed body: bytes as they come
	stateEnd                       // the end chunk was read
)

// Decoder opens what the server sends: the response header, then the body.
// It works on bytes the caller has buffered and never keeps them.
type Decoder struct {
	s     *Session
	c     chunkCrypto
	state decodeState
	err   error

	headLen int // the response header's sealed length, once opened; 0 before

	// The chunk whose length was decoded but whose body has not arrived
	// whole: decoding a length draws from the mask stream, so it happens once.
	sized   bool
	bodyLen int
	padLen  int

	// A stream in clear chunks (security none, TCP or Mux) needs no chunk whole:
	// its payload is handed out as it arrives. left is what remains of the
	// current chunk.
	clearStream bool
	left        int
}

// NewDecoder returns the decoder of the response.
func (s *Session) NewDecoder() *Decoder {
	d := &Decoder{s: s, c: newChunkCrypto(s, s.respKey, s.respIV)}
	d.clearStream = d.c.aead == nil && !d.c.pad && s.req.Command != CommandUDP
	return d
}

// Mid reports whether the decoder is inside a frame: the bytes that end it
// have not arrived.
func (d *Decoder) Mid() bool { return d.sized || d.left > 0 }

// Raw reports whether the response header is open and the body is unframed:
// every further byte is payload.
func (d *Decoder) Raw() bool { return d.state == stateRaw }

// Decode opens the next frame at the start of b: first the response header,
// then one body chunk at a time (or, for an unframed body, every byte of b).
// A stream in clear chunks is the exception that needs no chunk whole: its
// length field is one frame, and its payload is handed out as it arrives.
//
// When b holds less than the frame, Decode returns the frame's whole length
// (larger than len(b)) and nothing else: call again with more bytes after the
// same prefix. Otherwise frame is how many bytes of b the frame took; the
// caller drops them. payload is the chunk's plaintext, decrypted in place
// inside b[:frame]; it is empty for the response header. The chunk that ends
// the body returns io.EOF. Any other error fails the flow: Decode returns it
// again from then on.
func (d *Decoder) Decode(b []byte) (frame int, payload []byte, err error) {
	if d.err != nil {
		return 0, nil, d.err
	}
	switch d.state {
	case stateHeader:
		frame, err = d.header(b)
	case stateChunk:
		frame, payload, err = d.chunk(b)
	case stateRaw:
		if len(b) == 0 {
			return 1, nil, nil
		}
		return len(b), b, nil
	case stateEnd:
		return 0, nil, io.EOF
	}
	if err != nil && err != io.EOF {
		d.err = err
	}
	return frame, payload, err
}

// header opens the sealed length, then the sealed header, and checks that
// the header echoes the request's check byte. Commands the server appends
// (a dynamic port of the legacy protocol) are skipped.
func (d *Decoder) header(b []byte) (int, error) {
	if d.headLen == 0 {
		if len(b) < responseLenLen {
			return responseLenLen, nil
		}
		key := kdf16(d.s.respKey[:], saltResponseLenKey)
		nonce := kdf12(d.s.respIV[:], saltResponseLenNonce)
		var plain [2]byte
		if _, err := newGCM(key).Open(plain[:0], nonce[:], b[:responseLenLen], nil); err != nil {
			return 0, fmt.Errorf("%w: its length does not open with the request's keys", ErrResponseMismatch)
		}
		d.headLen = int(binary.BigEndian.Uint16(plain[:])) + TagSize
	}
	frame := responseLenLen + d.headLen
	if len(b) < frame {
		return frame, nil
	}
	key := kdf16(d.s.respKey[:], saltResponseHeaderKey)
	nonce := kdf12(d.s.respIV[:], saltResponseHeaderIV)
	sealed := b[responseLenLen:frame]
	h, err := newGCM(key).Open(sealed[:0], nonce[:], sealed, nil)
	if err != nil {
		return 0, fmt.Errorf("%w: it does not open with the request's keys", ErrResponseMismatch)
	}
	// check byte, option, command, command length, command data
	if len(h) < 4 || len(h) < 4+int(h[3]) {
		return 0, fmt.Errorf("%w: %d bytes", ErrResponseHeader, len(h))
	}
	if h[0] != d.s.check {
		return 0, ErrResponseMismatch
	}
	if d.s.Framed() {
		d.state = stateChunk
	} else {
		d.state = stateRaw
	}
	return frame, nil
}

// chunk opens one body chunk: its length (masked, counting the tag and the
// padding), the sealed payload, the padding.
func (d *Decoder) chunk(b []byte) (int, []byte, error) {
	if d.clearStream {
		return d.clearChunk(b)
	}
	if len(b) < SizeFieldLen {
		return SizeFieldLen, nil, nil
	}
	if !d.sized {
		pad, mask := d.c.next()
		size := int(binary.BigEndian.Uint16(b) ^ mask)
		if size < d.c.tagSize()+pad {
			return 0, nil, fmt.Errorf("%w: %d bytes with %d of padding", ErrChunkLength, size, pad)
		}
		d.sized, d.bodyLen, d.padLen = true, size, pad
	}
	frame := SizeFieldLen + d.bodyLen
	if len(b) < frame {
		return frame, nil, nil
	}
	d.sized = false
	sealed := b[SizeFieldLen : frame-d.padLen]
	plain := sealed
	if d.c.aead != nil {
		var err error
		if plain, err = d.c.open(sealed); err != nil {
			return 0, nil, err
		}
	}
	if len(plain) == 0 {
		d.state = stateEnd
		return frame, nil, io.EOF
	}
	return frame, plain, nil
}

// clearChunk reads a clear stream: a length (the chunk is never padded,
// since the request does not ask for padding without an AEAD), then the
// payload in as many pieces as it arrives in. A zero length ends the body.
func (d *Decoder) clearChunk(b []byte) (int, []byte, error) {
	if d.left > 0 {
		if len(b) == 0 {
			return 1, nil, nil
		}
		n := min(len(b), d.left)
		d.left -= n
		return n, b[:n], nil
	}
	if len(b) < SizeFieldLen {
		return SizeFieldLen, nil, nil
	}
	_, mask := d.c.next()
	d.left = int(binary.BigEndian.Uint16(b) ^ mask)
	if d.left == 0 {
		d.state = stateEnd
		return SizeFieldLen, nil, io.EOF
	}
	return SizeFieldLen, nil, nil
}

func (c *chunkCrypto) open(sealed []byte) ([]byte, error) {
	plain, err := c.aead.Open(sealed[:0], c.nextNonce(), sealed, nil)
	if err != nil {
		return nil, ErrChunkAuth
	}
	return plain, nil
}
