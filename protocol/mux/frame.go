// Package mux encodes and decodes Mux.Cool frames, the session multiplexing
// of Xray and V2Ray, and the XUDP use of them: one UDP session whose frames
// each name their own peer. It holds bytes only: no sockets, no goroutines.
//
// A frame is a two-byte metadata length, the metadata (session ID, status,
// option, and for some frames a network and a port-first address), then,
// when the option has OptionData, a two-byte data length and the data.
package mux

import (
	"encoding/binary"
	"errors"
	"fmt"

	"switchyard/netx"
	"switchyard/protocol/internal/wireaddr"
)

// Status is what a frame does to its session.
type Status byte

const (
	StatusNew       Status = 0x01
	StatusKeep      Status = 0x02
	StatusEnd       Status = 0x03
	StatusKeepAlive Status = 0x04
)

func (s Status) String() string {
	switch s {
	case StatusNew:
		return "new"
	case StatusKeep:
		return "keep"
	case StatusEnd:
		return "end"
	case StatusKeepAlive:
		return "keepalive"
	}
	return fmt.Sprintf("status %#02x", byte(s))
}

// Option is the frame's option bit set.
type Option byte

const (
	OptionData  Option = 0x01 // data follows the metadata
	OptionError Option = 0x02 // the session ended with an error
)

// Network is the network of a frame's target.
type Network byte

const (
	NetworkTCP Network = 0x01
	NetworkUDP Network = 0x02
)

// MaxMetaLen is the longest metadata accepted, as Xray accepts it.
const MaxMetaLen = 512

// MaxFrameOverhead is the most a frame AppendFrame writes adds to its data:
// both lengths, session, status, option, network, the longest address and a
// global ID.
const MaxFrameOverhead = 2 + 4 + 1 + MaxAddrLen + 8 + 2

// Frame is one Mux.Cool frame.
type Frame struct {
	Session uint16
	Status  Status
	Option  Option
	// Network is the target's network, 0 when the frame names no target.
	// New frames name one; Keep frames of a UDP session may (XUDP: the
	// packet's peer).
	Network Network
	Target  netx.Addr
	// GlobalID is the XUDP global ID of a New UDP frame with data; zero
	// when the frame carries none.
	GlobalID [8]byte
	// Data is the payload when Option has OptionData.
	Data []byte
}

// AppendFrame appends f. New frames must name a TCP or UDP target; Keep
// frames may name a UDP one; End and KeepAlive frames name none. A global ID
// is written on a New UDP frame when it is not zero.
func AppendFrame(dst []byte, f *Frame) ([]byte, error) {
	start := len(dst)
	dst = append(dst, 0, 0)
	dst = binary.BigEndian.AppendUint16(dst, f.Session)
	dst = append(dst, byte(f.Status), byte(f.Option))
	var err error
	switch {
	case f.Status == StatusNew:
		if f.Network != NetworkTCP && f.Network != NetworkUDP {
			return dst[:start], fmt.Errorf("mux: a new frame needs a tcp or udp target, not network %#02x", byte(f.Network))
		}
		dst = append(dst, byte(f.Network))
		if dst, err = AppendAddr(dst, f.Target); err != nil {
			return dst[:start], err
		}
		if f.Network == NetworkUDP && f.GlobalID != [8]byte{} {
			dst = append(dst, f.GlobalID[:]...)
		}
	case f.Status == StatusKeep && f.Network == NetworkUDP:
		dst = append(dst, byte(f.Network))
		if dst, err = AppendAddr(dst, f.Target); err != nil {
			return dst[:start], err
		}
	case f.Network != 0:
		return dst[:start], fmt.Errorf("mux: a %s frame names no %#02x target", f.Status, byte(f.Network))
	}
	binary.BigEndian.PutUint16(dst[start:], uint16(len(dst)-start-2))
	if f.Option&OptionData != 0 {
		if len(f.Data) > 0xffff {
			return dst[:start], fmt.Errorf("mux: data of %d bytes does not fit a frame", len(f.Data))
		}
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(f.Data)))
		dst = append(dst, f.Data...)
	}
	return dst, nil
}

// FrameLen returns how many bytes the frame at the start of b takes, data
// included. When b is too short to tell, the result is larger than len(b):
// read at least that many bytes and ask again.
func FrameLen(b []byte) (int, error) {
	if len(b) < 2 {
		return 2, nil
	}
	meta := int(binary.BigEndian.Uint16(b))
	if meta < 4 {
		return 0, fmt.Errorf("mux: metadata of %d bytes is shorter than 4", meta)
	}
	if meta > MaxMetaLen {
		return 0, fmt.Errorf("mux: metadata of %d bytes is longer than %d", meta, MaxMetaLen)
	}
	n := 2 + meta
	if len(b) < n {
		return n, nil
	}
	if Option(b[5])&OptionData == 0 {
		return n, nil
	}
	if len(b) < n+2 {
		return n + 2, nil
	}
	return n + 2 + int(binary.BigEndian.Uint16(b[n:])), nil
}

// ErrStatus is the error of a frame with a status other than the four known.
var ErrStatus = errors.New("unknown session status")

// Parser decodes frames. It keeps the last names it decoded, so a peer named
// again costs no allocation; one Parser serves one reader.
type Parser struct {
	names wireaddr.Names
}

// Parse decodes frame, exactly one frame as FrameLen sizes it. Data aliases
// frame. Bytes after the target in the metadata (padding) are ignored.
func (p *Parser) Parse(frame []byte) (Frame, error) {
	n, err := FrameLen(frame)
	if err != nil {
		return Frame{}, err
	}
	if n != len(frame) {
		return Frame{}, fmt.Errorf("mux: frame of %d bytes given %d", n, len(frame))
	}
	meta := frame[2 : 2+int(binary.BigEndian.Uint16(frame))]
	f := Frame{
		Session: binary.BigEndian.Uint16(meta),
		Status:  Status(meta[2]),
		Option:  Option(meta[3]),
	}
	switch f.Status {
	case StatusNew, StatusKeep, StatusEnd, StatusKeepAlive:
	default:
		return Frame{}, fmt.Errorf("mux: %w %#02x", ErrStatus, byte(f.Status))
	}
	// A Keep frame names a target only when its network byte says UDP.
	if f.Status == StatusNew || (f.Status == StatusKeep && len(meta) > 4 && Network(meta[4]) == NetworkUDP) {
		if len(meta) < 5 {
			return Frame{}, errors.New("mux: new frame without a target")
		}
		f.Network = Network(meta[4])
		if f.Network != NetworkTCP && f.Network != NetworkUDP {
			return Frame{}, fmt.Errorf("mux: unknown network %#02x", meta[4])
		}
		var an int
		if f.Target, an, err = parseAddr(meta[5:], &p.names); err != nil {
			return Frame{}, err
		}
		rest := meta[5+an:]
		if f.Status == StatusNew && f.Network == NetworkUDP && f.Option&OptionData != 0 && len(rest) >= 8 {
			f.GlobalID = [8]byte(rest)
		}
	}
	if f.Option&OptionData != 0 {
		f.Data = frame[2+len(meta)+2:]
	}
	return f, nil
}
