package netx

// PacketLink carries datagrams to many peers; each packet names its own peer.
//
// ReadPacket blocks until a datagram arrives or the link is closed. Close is
// idempotent and unblocks a pending ReadPacket.
type PacketLink interface {
	WritePacket(p []byte, to Addr) error
	ReadPacket(p []byte) (n int, from Addr, err error)
	Close() error
}
