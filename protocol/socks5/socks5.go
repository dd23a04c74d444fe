// Package socks5 is the SOCKS5 wire format (RFC 1928) with username and
// password authentication (RFC 1929), for both ends: the server side parses
// greetings and requests and encodes replies, the client side encodes
// greetings and requests and parses replies. It opens no socket: parsers read
// from an io.Reader or a byte slice, encoders append to a byte slice.
package socks5

import (
	"errors"

	"switchyard/netx"
)

// Version is the protocol version byte that starts every SOCKS5 message
// except the RFC 1929 sub-negotiation.
const Version = 0x05

// Authentication methods offered in a greeting and chosen by the server.
const (
	MethodNoAuth       byte = 0x00
	MethodGSSAPI       byte = 0x01
	MethodUserPass     byte = 0x02
	MethodNoAcceptable byte = 0xFF
)

// Commands of a request.
const (
	CmdConnect      byte = 0x01
	CmdBind         byte = 0x02
	CmdUDPAssociate byte = 0x03
)

// Address types.
const (
	AtypIPv4   byte = 0x01
	AtypDomain byte = 0x03
	AtypIPv6   byte = 0x04
)

// Reply codes (the REP field of a reply).
const (
	ReplySucceeded               byte = 0x00
	ReplyGeneralFailure          byte = 0x01
	ReplyNotAllowed              byte = 0x02 // connection not allowed by ruleset
	ReplyNetworkUnreachable      byte = 0x03
	ReplyHostUnreachable         byte = 0x04
	ReplyConnectionRefused       byte = 0x05
	ReplyTTLExpired              byte = 0x06
	ReplyCommandNotSupported     byte = 0x07
	ReplyAddressTypeNotSupported byte = 0x08
)

// ReplyText names a reply code as RFC 1928 does.
func ReplyText(code byte) string {
	switch code {
	case ReplySucceeded:
		return "succeeded"
	case ReplyGeneralFailure:
		return "general SOCKS server failure"
	case ReplyNotAllowed:
		return "connection not allowed by ruleset"
	case ReplyNetworkUnreachable:
		return "network unreachable"
	case ReplyHostUnreachable:
		return "host unreachable"
	case ReplyConnectionRefused:
		return "connection refused"
	case ReplyTTLExpired:
		return "TTL expired"
	case ReplyCommandNotSupported:
		return "command not supported"
	case ReplyAddressTypeNotSupported:
		return "address type not supported"
	}
	return "unassigned reply code"
}

// userPassVersion is the version byte of the RFC 1929 sub-negotiation.
const userPassVersion = 0x01

// Errors callers test with errors.Is. Each is returned wrapped with what was
// read.
var (
	// ErrCommandNotSupported: a request names BIND or an unknown command.
	// The server answers ReplyCommandNotSupported.
	ErrCommandNotSupported = errors.New("socks5: command not supported")
	// ErrAddressTypeNotSupported: an address type other than IPv4, IPv6 or
	// a domain. The server answers ReplyAddressTypeNotSupported.
	ErrAddressTypeNotSupported = errors.New("socks5: address type not supported")
	// ErrFragmented: a UDP datagram with a non-zero FRAG field; fragments
	// are not reassembled, the datagram is dropped.
	ErrFragmented = errors.New("socks5: fragmented datagram")
	// ErrNoAcceptableMethod: the server accepts none of the methods offered.
	// Its fault is netx.FaultProxyAuth.
	ErrNoAcceptableMethod error = &netx.FaultError{Kind: netx.FaultProxyAuth, Err: errors.New("socks5: auth method not supported")}
	// ErrAuthRejected: the server rejects the username and password. Its
	// fault is netx.FaultProxyAuth.
	ErrAuthRejected error = &netx.FaultError{Kind: netx.FaultProxyAuth, Err: errors.New("socks5: server rejects account")}
)
