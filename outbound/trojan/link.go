package trojan

import (
	"net"

	"switchyard/netx"
	"switchyard/outbound/internal/proxyconn"
	codec "switchyard/protocol/trojan"
)

// BufSize (TROJAN_BUF) bounds one frame of a datagram link each way: the
// pooled buffers a packet is sealed in and a large frame from the server is
// read into, both held only while a packet is in flight (see
// proxyconn.Link).
const BufSize = 16 * 1024

// newPacketLink is a UDP ASSOCIATE stream: every packet, both ways, is the
// peer's address, a length, CRLF and the payload. A packet whose payload and
// the request header's reserve exceed the buffer is refused.
func newPacketLink(c net.Conn) *proxyconn.Link {
	return proxyconn.NewLink(c, &packetFraming{}, BufSize, codec.RequestHeaderMax)
}

// packetFraming is Trojan's UDP packets.
type packetFraming struct {
	parser codec.PacketParser // reader side
}

func (*packetFraming) AppendFrame(dst, p []byte, to netx.Addr) ([]byte, error) {
	return codec.AppendPacket(dst, to, p)
}

func (*packetFraming) FrameLen(b []byte) (int, error) { return codec.PacketLen(b) }

func (f *packetFraming) OpenFrame(frame []byte) ([]byte, netx.Addr, bool, error) {
	peer, payload, err := f.parser.Parse(frame)
	return payload, peer, err == nil, err
}
