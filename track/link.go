package track

import (
	"net"

	"switchyard/netx"
)

// Link is a tracked UDP sub-link: WritePacket counts the payload Up,
// ReadPacket the payload Down. A sub-link of a session is paced at its
// user's rates (a datagram waits its turn before it is sent, or before it is
// delivered), and its payload counts toward the session's wire bytes and
// its user's totals when the session charges datagrams.
type Link struct {
	l netx.PacketLink
	m meter
}

var _ netx.PacketLink = (*Link)(nil)

// Link registers one UDP sub-link and returns l wrapped. Closing the wrapper
// unregisters the flow and closes l.
func (t *Tracker) Link(meta Meta, l netx.PacketLink) *Link {
	tl := &Link{l: l}
	tl.m.meta = meta
	tl.m.inner = l
	t.add(&tl.m, true)
	return tl
}

// ID is the flow's id in the tracker.
func (l *Link) ID() uint64 { return l.m.id }

// WritePacket sends p to its peer. It fails once the link is closed or
// killed, even when the inner link would swallow the packet.
func (l *Link) WritePacket(p []byte, to netx.Addr) error {
	if err := l.ended(); err != nil {
		return err
	}
	if err := l.m.paceUp(int64(len(p))); err != nil {
		return err
	}
	// Counted before the send, so a reply can never be seen before the
	// datagram it answers; a failed send takes its count back.
	l.m.addUp(int64(len(p)))
	if err := l.l.WritePacket(p, to); err != nil {
		l.m.addUp(-int64(len(p)))
		return l.m.err(err)
	}
	return nil
}

// WritePackets sends ps to their peer in one go where the inner link can
// (netx.PacketBatchWriter), counted as WritePacket counts them. A paced
// link sends them one by one, each waiting its turn.
func (l *Link) WritePackets(ps [][]byte, to netx.Addr) (int, error) {
	if l.m.user != nil {
		for i, p := range ps {
			if err := l.WritePacket(p, to); err != nil {
				return i, err
			}
		}
		return len(ps), nil
	}
	if err := l.ended(); err != nil {
		return 0, err
	}
	var total int64
	for _, p := range ps {
		total += int64(len(p))
	}
	l.m.addUp(total)
	n, err := netx.WritePackets(l.l, ps, to)
	if err != nil {
		for _, p := range ps[n:] {
			l.m.addUp(-int64(len(p)))
		}
		return n, l.m.err(err)
	}
	return n, nil
}

// ReadPacket receives one datagram. It fails once the link is closed or
// killed.
func (l *Link) ReadPacket(p []byte) (int, netx.Addr, error) {
	n, from, err := l.l.ReadPacket(p)
	if err != nil {
		return n, from, l.m.err(err)
	}
	if err := l.ended(); err != nil {
		return 0, netx.Addr{}, err
	}
	l.m.addDown(int64(n))
	if err := l.m.paceDown(int64(n)); err != nil {
		return 0, netx.Addr{}, err
	}
	return n, from, nil
}

// WaitPacket waits for the inner link's next datagram without taking it
// (netx.PacketWaiter).
func (l *Link) WaitPacket() (int, error) { return netx.WaitPacket(l.l) }

// NotifyIdle forwards to the inner link (netx.IdleNotifier).
func (l *Link) NotifyIdle(idle func()) bool { return netx.NotifyIdle(l.l, idle) }

// Close unregisters the flow and closes the inner link. It is idempotent.
func (l *Link) Close() error { return l.m.close() }

func (l *Link) ended() error {
	switch {
	case l.m.killed.Load():
		return ErrKilled
	case l.m.closed.Load():
		return net.ErrClosed
	}
	return nil
}

// PollSources forwards the inner link's, each datagram counted as
// ReadPacket counts it (netx.PollableLink). A paced link has none: its
// reads wait their turn, which a Poller's cannot.
func (l *Link) PollSources(closed func()) []netx.PollSource {
	if l.m.user != nil {
		return nil
	}
	srcs := netx.PollSourcesOf(l.l, closed)
	for i := range srcs {
		read := srcs[i].Read
		srcs[i].Read = func(p []byte) (int, netx.Addr, error) {
			n, from, err := read(p)
			if err != nil {
				return n, from, l.m.err(err)
			}
			if err := l.ended(); err != nil {
				return 0, netx.Addr{}, err
			}
			l.m.addDown(int64(n))
			return n, from, nil
		}
	}
	return srcs
}
