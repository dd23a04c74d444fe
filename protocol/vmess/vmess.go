// Package vmess is the client side of the VMess wire format with the AEAD
// header: the request header a client seals with its user's key, the
// response header it opens, and the body chunks in both directions for each
// security. It holds bytes and crypto only: no sockets, no goroutines.
//
// A flow is one Session: NewSession draws the flow's body keys, AppendRequest
// seals the request header, NewEncoder frames what the client sends and
// NewDecoder opens what the server answers.
package vmess

import (
	"errors"

	"switchyard/netx"
)

// Version is the request header's version byte.
const Version = 1

// Command is what a request asks the server to open.
type Command byte

const (
	CommandTCP Command = 0x01
	CommandUDP Command = 0x02
	// CommandMux opens a Mux.Cool stream (the destination v1.mux.cool of
	// Xray's client): its request names no destination, and its body is a
	// stream, as a TCP one is.
	CommandMux Command = 0x03
)

// Option is the request header's option bitmask.
type Option byte

const (
	// OptionChunkStream frames the body in length-prefixed chunks.
	OptionChunkStream Option = 0x01
	// OptionChunkMasking masks each chunk's length with SHAKE128 of the body IV.
	OptionChunkMasking Option = 0x04
	// OptionGlobalPadding appends 0 to 63 random bytes to each chunk, their
	// count drawn from the same SHAKE128 stream as the length masks.
	OptionGlobalPadding Option = 0x08
)

// Sizes of the wire format.
const (
	// TagSize is the authentication tag of every AEAD in VMess.
	TagSize = 16
	// SizeFieldLen is the length prefix of a body chunk.
	SizeFieldLen = 2
	// MaxPadding bounds the global padding of one chunk (it is 0 to 63 bytes).
	MaxPadding = 64
	// ChunkOverhead is the most bytes one chunk adds to its payload: the
	// length, the tag and the largest padding.
	ChunkOverhead = SizeFieldLen + TagSize + MaxPadding - 1
	// ChunkSize is the buffer the reference client (Xray's) frames its body
	// in, 8 KiB: a sealed chunk, its length, tag and padding included, and a
	// datagram's chunk of any security fit in it whole, and a clear stream
	// chunk carries at most that much payload. Its servers read chunks into
	// buffers of that size, and Xray's panics on a clear stream chunk that
	// is larger; the encoder never sends a chunk its client would not.
	ChunkSize = 8192
	// MaxHeaderLen is the longest sealed request header: the auth id (16),
	// the sealed length (2 + 16), the connection nonce (8), and the sealed
	// header (38 fixed bytes, a port, an address of up to 1 + 1 + 255 bytes,
	// up to 15 bytes of padding, the 4-byte checksum, and the 16-byte tag).
	MaxHeaderLen = 16 + 2 + TagSize + 8 + 38 + 2 + 257 + 15 + 4 + TagSize
	// responseLenLen is the sealed length of the response header.
	responseLenLen = 2 + TagSize
)

// Errors for bytes from the server that do not open. Each fails its flow;
// each carries its netx.Fault (a response header is the node's: it names
// no target).
var (
	// ErrResponseMismatch is a response header whose check byte is not the
	// one the request asked for, or that does not open with the request's
	// keys: the answer is not to this request.
	ErrResponseMismatch error = &netx.FaultError{Kind: netx.FaultVMessBadHeader, Err: errors.New("vmess: response header does not match the request")}
	// ErrResponseHeader is a response header too short for its own fields.
	ErrResponseHeader error = &netx.FaultError{Kind: netx.FaultVMessBadHeader, Err: errors.New("vmess: malformed response header")}
	// ErrChunkAuth is a body chunk that does not authenticate.
	ErrChunkAuth error = &netx.FaultError{Kind: netx.FaultFraming, Err: errors.New("vmess: body chunk does not authenticate")}
	// ErrChunkLength is a chunk length shorter than the chunk's tag and padding.
	ErrChunkLength error = &netx.FaultError{Kind: netx.FaultFraming, Err: errors.New("vmess: body chunk length is shorter than its tag and padding")}
)
