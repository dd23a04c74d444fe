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

// A PacketBatch takes the datagrams one reader of a link received in a
// row and hands them on together: Add takes each (p is valid only during
// the call), Flush hands on what was added. Its reader calls both from one
// goroutine.
type PacketBatch interface {
	Add(p []byte, from Addr)
	Flush()
}

// A BatchPusher is a PacketPusher whose readers can hand on their
// datagrams in batches: each reader opens a batch of its own, adds every
// datagram it receives and flushes the batch whenever it would wait for
// the next (see IdleNotifier), or after each datagram when its sub-link
// cannot tell.
type BatchPusher interface {
	// PushBatches makes every reader of the link call open once, then
	// hand its datagrams to the batch open returned. Call it once, before
	// the first WritePacket, instead of PushPackets.
	PushBatches(open func() PacketBatch)
}

// A PacketBatchWriter is a PacketLink that sends several datagrams to one
// peer in one go: a UDP socket in one system call, where the kernel
// segments them (UDP_SEGMENT).
type PacketBatchWriter interface {
	// WritePackets sends ps to to, in order, each a datagram of its own.
	// It returns how many it sent: all of them, or fewer with the error
	// that stopped it.
	WritePackets(ps [][]byte, to Addr) (int, error)
}

// WritePackets sends ps to to on l: in one go when l is a
// PacketBatchWriter, else with one WritePacket each, up to the first that
// fails. It returns how many it sent.
func WritePackets(l PacketLink, ps [][]byte, to Addr) (int, error) {
	if b, ok := l.(PacketBatchWriter); ok {
		return b.WritePackets(ps, to)
	}
	for i, p := range ps {
		if err := l.WritePacket(p, to); err != nil {
			return i, err
		}
	}
	return len(ps), nil
}
