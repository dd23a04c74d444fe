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

// A PacketPusher is a PacketLink that can hand each datagram it receives
// straight to a function, on the goroutine that received it, instead of
// through ReadPacket: its owner then needs no goroutine of its own waiting
// for replies.
type PacketPusher interface {
	// PushPackets makes the link call deliver with every datagram it
	// receives from then on, attributed to its peer. p is valid only
	// during the call; deliver may be called from several goroutines at
	// once and should not block for long. Call it once, before the first
	// WritePacket; ReadPacket is not to be used afterwards.
	PushPackets(deliver func(p []byte, from Addr))
}
