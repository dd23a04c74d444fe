// Package trojan encodes the Trojan client's request header and decodes and
// encodes its UDP packets. It holds bytes only: no sockets, no goroutines.
//
// A request is the password key (hex SHA-224 of the password), CRLF, a
// command, a SOCKS5 address (package socks5 encodes and decodes it) and
// CRLF. A CONNECT stream then carries the flow's bytes unchanged; a UDP
// ASSOCIATE stream carries packets, each an address, a two-byte length, CRLF
// and the payload, both ways.
package trojan

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"switchyard/netx"
	"switchyard/protocol/socks5"
)

// Commands of a request.
const (
	CmdConnect      = 0x01
	CmdUDPAssociate = 0x03
)

// KeyLen is the length of the key: SHA-224 in hex.
const KeyLen = 56

// Key is what a request authenticates with.
type Key [KeyLen]byte

// NewKey derives the key of a password: its SHA-224 digest in lowercase hex.
func NewKey(password string) Key {
	sum := sha256.Sum224([]byte(password))
	var k Key
	hex.Encode(k[:], sum[:])
	return k
}

// RequestHeaderMax is the longest request header: the key, CRLF, the
// command, the longest address and CRLF.
const RequestHeaderMax = KeyLen + 2 + 1 + socks5.MaxAddrLen + 2

// AppendRequest appends the request header for cmd toward to. A UDP
// ASSOCIATE names a placeholder (0.0.0.0:0): its packets name their peers.
func AppendRequest(dst []byte, k *Key, cmd byte, to netx.Addr) ([]byte, error) {
	if cmd != CmdConnect && cmd != CmdUDPAssociate {
		return dst, fmt.Errorf("trojan: unknown command %#02x", cmd)
	}
	start := len(dst)
	dst = append(dst, k[:]...)
	dst = append(dst, '\r', '\n', cmd)
	dst, err := socks5.AppendAddr(dst, to)
	if err != nil {
		return dst[:start], err
	}
	return append(dst, '\r', '\n'), nil
}
