package transport

import (
	"encoding/binary"
	"math"
)

// WebSocket opcodes (RFC 6455 5.2).
const (
	opContinuation = 0x0
	opText         = 0x1
	opBinary       = 0x2
	opClose        = 0x8
	opPing         = 0x9
	opPong         = 0xA
)

// maxControlPayload bounds a control frame's payload (RFC 6455 5.5).
const maxControlPayload = 125

// maxFrameHeader is the longest client frame header: 2 bytes, a 64-bit
// length and the masking key.
const maxFrameHeader = 2 + 8 + 4

// The errors of a server frame that breaks RFC 6455; each fails the flow.
var (
	errWSReserved   = framingError("ws: the server set reserved bits (no extension was agreed)")
	errWSOpcode     = framingError("ws: the server sent an unknown opcode")
	errWSControl    = framingError("ws: the server sent a fragmented or oversized control frame")
	errWSMasked     = framingError("ws: the server masked a frame")
	errWSFrameRange = framingError("ws: the server's frame length is out of range")
)

// frameHeader is a parsed frame header.
type frameHeader struct {
	fin     bool
	opcode  byte
	length  int64
	hdrSize int // bytes the header takes on the wire
}

// parseFrameHeader parses a server frame header from the start of b. need
// is the header's whole size; when b is shorter than need, more bytes are
// needed and h is not valid yet.
func parseFrameHeader(b []byte) (h frameHeader, need int, err error) {
	if len(b) < 2 {
		return h, 2, nil
	}
	b0, b1 := b[0], b[1]
	if b0&0x70 != 0 {
		return h, 0, errWSReserved
	}
	if b1&0x80 != 0 {
		return h, 0, errWSMasked
	}
	h.fin = b0&0x80 != 0
	h.opcode = b0 & 0x0F
	switch h.opcode {
	case opContinuation, opText, opBinary:
	case opClose, opPing, opPong:
		if !h.fin || b1&0x7F > maxControlPayload {
			return h, 0, errWSControl
		}
	default:
		return h, 0, errWSOpcode
	}
	need = 2
	switch l := b1 & 0x7F; l {
	case 126:
		need += 2
	case 127:
		need += 8
	default:
		h.length = int64(l)
	}
	if len(b) < need {
		return h, need, nil
	}
	switch need {
	case 4:
		h.length = int64(binary.BigEndian.Uint16(b[2:4]))
	case 10:
		l := binary.BigEndian.Uint64(b[2:10])
		if l > math.MaxInt64 {
			return h, 0, errWSFrameRange
		}
		h.length = int64(l)
	}
	h.hdrSize = need
	return h, need, nil
}

// appendFrameHeader appends a final, masked client frame header.
func appendFrameHeader(b []byte, opcode byte, length int, key [4]byte) []byte {
	b = append(b, 0x80|opcode)
	switch {
	case length <= 125:
		b = append(b, 0x80|byte(length))
	case length <= math.MaxUint16:
		b = append(b, 0x80|126)
		b = binary.BigEndian.AppendUint16(b, uint16(length))
	default:
		b = append(b, 0x80|127)
		b = binary.BigEndian.AppendUint64(b, uint64(length))
	}
	return append(b, key[:]...)
}

// maskInto writes src XOR the masking key into dst (len(dst) >= len(src)),
// the key aligned at src[0].
func maskInto(dst, src []byte, key [4]byte) {
	k32 := binary.LittleEndian.Uint32(key[:])
	k64 := uint64(k32) | uint64(k32)<<32
	i := 0
	for ; i+8 <= len(src); i += 8 {
		binary.LittleEndian.PutUint64(dst[i:], binary.LittleEndian.Uint64(src[i:])^k64)
	}
	for ; i < len(src); i++ {
		dst[i] = src[i] ^ key[i&3]
	}
}
