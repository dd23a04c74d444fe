// Package proxyconn is what every proxy client runs on: a handshake bound to
// the dial's context, the client runtime's errors, and the datagram link
// that carries a protocol's framed packets over one stream.
package proxyconn

import (
	"errors"
	"io"

	"switchyard/netx"
)

// The client runtime's errors, one per kind, with the texts every proxy
// client shares. Callers match them with errors.Is.
var (
	// ErrHandshakeClosed: the upstream closed before the handshake was
	// over. It matches io.ErrUnexpectedEOF.
	ErrHandshakeClosed = KindError("upstream closed during the handshake", io.ErrUnexpectedEOF)
	// ErrFrameClosed: the upstream closed with part of a frame unread. It
	// matches io.ErrUnexpectedEOF.
	ErrFrameClosed = KindError("upstream closed inside a frame", io.ErrUnexpectedEOF)
	// ErrUpstreamFrameTooLarge: a frame from the upstream does not fit the
	// runtime's read buffer.
	ErrUpstreamFrameTooLarge error = &netx.FaultError{Kind: netx.FaultLocalRefusal, Err: errors.New("upstream frame larger than the client runtime's buffer")}
	// ErrFrameTooLarge: a datagram whose sealed frame does not fit the
	// staging buffer toward the upstream.
	ErrFrameTooLarge error = &netx.FaultError{Kind: netx.FaultLocalRefusal, Err: errors.New("frame larger than the client runtime's buffer")}
)

// KindError returns an error with a fixed text that also matches (errors.Is)
// kind, the standard error of its kind.
func KindError(text string, kind error) error { return &kindError{text, kind} }

type kindError struct {
	text string
	kind error
}

func (e *kindError) Error() string        { return e.text }
func (e *kindError) Is(target error) bool { return target == e.kind }
