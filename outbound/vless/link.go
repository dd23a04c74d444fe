package vless

import (
	"switchyard/netx"
	codec "switchyard/protocol/vless"
)

// packetFraming is a VLESS UDP stream toward one target: each packet, both
// ways, is a length and the payload. The request named the target, so a
// packet's own peer is not carried, and every reply comes from the target.
type packetFraming struct {
	target netx.Addr
}

func (packetFraming) AppendFrame(dst, p []byte, _ netx.Addr) ([]byte, error) {
	return codec.AppendPacket(dst, p)
}

func (packetFraming) FrameLen(b []byte) (int, error) { return codec.PacketLen(b) }

func (f packetFraming) OpenFrame(frame []byte) ([]byte, netx.Addr, bool, error) {
	return frame[codec.PacketHeaderLen:], f.target, true, nil
}
