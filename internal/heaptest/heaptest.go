// Package heaptest measures what live objects hold on the heap, for tests
// that bound the memory an idle link keeps.
package heaptest

import (
	"runtime"

	"switchyard/netx"
)

// InUse returns the bytes of the heap's spans in use once garbage is
// collected. Two collections empty the buffer pools (sync.Pool keeps what
// it held at one collection until the next), so a pooled buffer counts only
// while something holds it.
func InUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// PerItem returns what build leaves on the heap, divided by n: the heap in
// use after it, less the heap in use before. What build made must stay
// reachable until PerItem returns (the caller keeps it).
func PerItem(n int, build func()) float64 {
	before := InUse()
	build()
	after := InUse()
	return (float64(after) - float64(before)) / float64(n)
}

// Reader reads l as the fan-out reader does, until l fails: it waits for a
// datagram without a buffer (netx.WaitPacket), takes a pooled buffer of the
// size the wait returned, reads into it and gives the buffer back. It sends
// each datagram's size on got, and closes got once l fails.
func Reader(l netx.PacketLink, got chan<- int) {
	defer close(got)
	for {
		size, err := netx.WaitPacket(l)
		if err != nil {
			size = 0
		}
		bp := netx.GetBuf(size)
		n, _, err := l.ReadPacket(*bp)
		netx.PutBuf(bp)
		if err != nil {
			return
		}
		got <- n
	}
}
