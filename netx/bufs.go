package netx

import "sync"

// Datagram buffers come in three size classes, each pooled, and are taken
// only while a datagram is in flight: a reader waits for its next datagram
// without one (WaitPacket) and returns it as soon as the datagram is
// passed on. So an idle association holds no buffer, and once traffic stops
// the pools empty at the next collections and the memory goes back.
const (
	// SmallBuf holds a datagram that fits an MTU.
	SmallBuf = 2 << 10
	// MediumBuf holds a larger datagram that is still far from the limit
	// (a GSO-sized QUIC flight, a jumbo frame).
	MediumBuf = 16 << 10
	// MaxBuf holds the largest UDP payload (65,535 bytes) and the largest
	// header a proxy protocol puts in front of it.
	MaxBuf = 64<<10 + 512
)

var bufPools = [...]sync.Pool{
	{New: func() any { b := make([]byte, SmallBuf); return &b }},
	{New: func() any { b := make([]byte, MediumBuf); return &b }},
	{New: func() any { b := make([]byte, MaxBuf); return &b }},
}

// GetBuf returns a pooled buffer of at least n bytes (of MaxBuf when n is
// larger), its length the capacity of its class. Give it back with PutBuf.
func GetBuf(n int) *[]byte {
	switch {
	case n <= SmallBuf:
		return bufPools[0].Get().(*[]byte)
	case n <= MediumBuf:
		return bufPools[1].Get().(*[]byte)
	}
	return bufPools[2].Get().(*[]byte)
}

// PutBuf returns a buffer GetBuf gave out. A buffer of any other size is
// left to the collector.
func PutBuf(bp *[]byte) {
	*bp = (*bp)[:cap(*bp)]
	switch cap(*bp) {
	case SmallBuf:
		bufPools[0].Put(bp)
	case MediumBuf:
		bufPools[1].Put(bp)
	case MaxBuf:
		bufPools[2].Put(bp)
	}
}
