package netx

import (
	"errors"
	"syscall"
)

// ErrWouldBlock is a PollSource's answer when no datagram is waiting.
var ErrWouldBlock = errors.New("no datagram waiting")

// A PollSource is one descriptor of a link whose datagrams a Poller takes
// without waiting: Conn is watched for readiness, and Read takes one
// waiting datagram into p (ErrWouldBlock when none is), with whatever the
// link does to each datagram it reads (counting, translating its errors).
// Read fails as the link's ReadPacket would once the link is closed.
type PollSource struct {
	Conn syscall.RawConn
	Read func(p []byte) (int, Addr, error)
}

// A PollableLink is a PacketLink whose reads a Poller can drive instead of
// a goroutine of their own. PollSources returns its descriptors, or none
// when it cannot be read that way (a paced link, another system), and
// arranges for closed to be called once when the link closes, whoever
// closes it, so that its reader learns it ended: a closed descriptor is
// no longer watched. Call it at most once, before the link is read.
type PollableLink interface {
	PacketLink
	PollSources(closed func()) []PollSource
}

// PollSourcesOf returns l's poll sources, or none when l is no
// PollableLink.
func PollSourcesOf(l PacketLink, closed func()) []PollSource {
	if p, ok := l.(PollableLink); ok {
		return p.PollSources(closed)
	}
	return nil
}

// A PollDriven link can have a Poller read its sub-links (a fan-out
// association): DriveWith hands it the poller. Call it once, before the
// first WritePacket, after PushBatches.
type PollDriven interface {
	DriveWith(p *Poller)
}
