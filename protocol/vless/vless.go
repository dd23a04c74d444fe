// Package vless encodes the VLESS client's request header and its UDP
// packets and checks the server's response header. It holds bytes only: no
// sockets, no goroutines.
//
// A request is the version (0), the user's UUID, the addons' length (0: no
// addons) and the command; TCP and UDP commands then name the destination in
// the port-first form, the Mux command names none (its target is Mux.Cool,
// which carries its own addresses). A response is the version and the
// response addons, length first. After the headers a TCP stream carries the
// flow's bytes unchanged; a UDP stream carries packets, each a two-byte
// length and the payload, all to and from the one destination named.
package vless

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"

	"switchyard/netx"
	"switchyard/protocol/mux"
)

// Version is the protocol version of requests and responses.
const Version = 0

// Commands of a request.
const (
	CmdTCP = 0x01
	CmdUDP = 0x02
	CmdMux = 0x03
)

// UUID is a user's ID.
type UUID [16]byte

// ParseUUID parses the 8-4-4-4-12 hex form of a UUID.
func ParseUUID(s string) (UUID, error) {
	var id UUID
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return id, fmt.Errorf("vless: uuid %q is not in the 8-4-4-4-12 form", s)
	}
	var digits [32]byte
	n := 0
	for i := 0; i < len(s); i++ {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			continue
		}
		digits[n] = s[i]
		n++
	}
	if _, err := hex.Decode(id[:], digits[:]); err != nil {
		return UUID{}, fmt.Errorf("vless: uuid %q: %w", s, err)
	}
	return id, nil
}

// RequestHeaderMax is the longest request header: version, UUID, addons
// length, command and the longest address.
const RequestHeaderMax = 1 + 16 + 1 + 1 + mux.MaxAddrLen

// AppendRequest appends the request header for cmd; to is the destination
// of CmdTCP and CmdUDP and is not written for CmdMux.
func AppendRequest(dst []byte, id *UUID, cmd byte, to netx.Addr) ([]byte, error) {
	start := len(dst)
	dst = append(dst, Version)
	dst = append(dst, id[:]...)
	dst = append(dst, 0, cmd)
	switch cmd {
	case CmdMux:
		return dst, nil
	case CmdTCP, CmdUDP:
		out, err := mux.AppendAddr(dst, to)
		if err != nil {
			return dst[:start], fmt.Errorf("vless: %w", err)
		}
		return out, nil
	}
	return dst[:start], fmt.Errorf("vless: unknown command %#02x", cmd)
}

// ErrVersion is the error of a response of another version; its fault is
// netx.FaultFraming.
var ErrVersion error = &netx.FaultError{Kind: netx.FaultFraming, Err: errors.New("vless: unexpected response version")}

// ResponseLen checks the response header at the start of b and returns how
// many bytes it takes, addons included. When b is too short to tell, the
// result is larger than len(b): read at least that many bytes and ask again.
// The addons are skipped: they carry nothing for the plain flow.
func ResponseLen(b []byte) (int, error) {
	if len(b) < 1 {
		return 2, nil
	}
	if b[0] != Version {
		return 0, fmt.Errorf("%w %d (expected %d)", ErrVersion, b[0], Version)
	}
	if len(b) < 2 {
		return 2, nil
	}
	return 2 + int(b[1]), nil
}

// PacketHeaderLen is the length prefix of a UDP packet.
const PacketHeaderLen = 2

// AppendPacket appends one UDP packet.
func AppendPacket(dst, payload []byte) ([]byte, error) {
	if len(payload) > 0xffff {
		return dst, fmt.Errorf("vless: payload of %d bytes does not fit a packet", len(payload))
	}
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(payload)))
	return append(dst, payload...), nil
}

// PacketLen returns how many bytes the packet at the start of b takes, or,
// when b is too short to tell, more than len(b). The payload is the packet
// after its PacketHeaderLen bytes.
func PacketLen(b []byte) (int, error) {
	if len(b) < PacketHeaderLen {
		return PacketHeaderLen, nil
	}
	return PacketHeaderLen + int(binary.BigEndian.Uint16(b)), nil
}
