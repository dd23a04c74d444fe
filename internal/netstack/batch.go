package netstack

import (
	"sync"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/link/channel"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/stack/gro"
)

// link is the interface's link endpoint: the channel endpoint, with the
// dispatcher the stack attached to it at hand, so that a batch of received
// packets can go through GRO before the stack takes them.
type link struct {
	*channel.Endpoint

	mu sync.RWMutex // guards d
	d  stack.NetworkDispatcher
}

func (l *link) Attach(d stack.NetworkDispatcher) {
	l.mu.Lock()
	l.d = d
	l.mu.Unlock()
	l.Endpoint.Attach(d)
}

func (l *link) dispatcher() stack.NetworkDispatcher {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.d
}

// batcher coalesces the TCP segments of one batch (gVisor's GRO).
type batcher struct {
	mu  sync.Mutex // one batch at a time
	gro gro.GRO
}

// InjectBatch hands every packet of ps to the stack as InjectPacket does,
// the consecutive TCP segments of one flow coalesced first (GRO, which
// verifies their checksums): a device that split the kernel's large
// segments to its MTU hands the stack large segments again. Only a
// Transparent stack coalesces; the packets are copied.
func (st *Stack) InjectBatch(ps [][]byte) {
	if !st.transparent {
		for _, p := range ps {
			st.InjectPacket(p)
		}
		return
	}
	d := st.ep.dispatcher()
	if d == nil {
		return // closed
	}
	st.batch.mu.Lock()
	defer st.batch.mu.Unlock()
	st.batch.gro.Dispatcher = d
	for _, p := range ps {
		if len(p) == 0 {
			continue
		}
		var proto tcpip.NetworkProtocolNumber
		switch p[0] >> 4 {
		case 4:
			proto = header.IPv4ProtocolNumber
		case 6:
			proto = header.IPv6ProtocolNumber
		default:
			continue
		}
		pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(p)})
		pkt.NetworkProtocolNumber = proto
		st.batch.gro.Enqueue(pkt)
		pkt.DecRef()
	}
	st.batch.gro.Flush()
	st.batch.gro.Dispatcher = nil
}
