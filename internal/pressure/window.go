package pressure

import (
	"time"

	"switchyard/netx"
)

// The interval rules of the spec.
const (
	MinInterval     = time.Second      // shorter: keep accumulating
	MaxInterval     = 10 * time.Second // longer: unknown
	MinPayloadBytes = 4 << 10          // payload-byte progress of an active interval
	MinDatagrams    = 32               // or QUIC DATAGRAM frames
)

// Counters is one reading of a carrier's cumulative statistics. Every
// counter only grows while the carrier lives, except Lost and LostBytes of
// QUIC, which fall back when a packet declared lost arrives after all.
type Counters struct {
	// Carrier names the socket or connection read; a different value
	// starts a new window (a replaced connection restarts its counters).
	Carrier uint64
	Family  netx.Family   // the actual socket family
	RTT     time.Duration // the smoothed RTT at the reading
	// Acked grows with fresh ACK progress, each acknowledgement of our
	// data giving the RTT a fresh sample: TCP bytes acknowledged, QUIC
	// packets acknowledged.
	Acked uint64
	// Payload is the payload bytes moved in both directions: bytes
	// acknowledged plus bytes received.
	Payload uint64
	// Sent is the outgoing payload bytes, retransmissions included.
	Sent uint64
	// Datagrams is the QUIC DATAGRAM frames sent (0 on TCP).
	Datagrams uint64
	// Transmissions is the data segments or packets sent, retransmissions
	// included; Lost those retransmitted (TCP) or declared lost (QUIC),
	// LostBytes their bytes.
	Transmissions, Lost, LostBytes uint64
}

// Sample is one active interval of one carrier: the progress between two
// readings and the RTT at its end.
type Sample struct {
	Start, End                     time.Time
	Family                         netx.Family
	RTT                            time.Duration
	Payload, Sent, Datagrams       uint64
	Transmissions, Lost, LostBytes uint64
}

// Verdict is what a reading made of the window's interval.
type Verdict uint8

const (
	// Accumulating: the interval is shorter than MinInterval; it goes on.
	Accumulating Verdict = iota
	// Unknown: the interval was longer than MaxInterval, idle, below the
	// progress minimums, or the first of its carrier: it proves neither
	// pressure nor recovery, and the next interval starts at this reading.
	Unknown
	// Active: the interval qualifies; its Sample is for the Monitor.
	Active
)

func (v Verdict) String() string {
	switch v {
	case Accumulating:
		return "accumulating"
	case Active:
		return "active"
	}
	return "unknown"
}

// Window turns one carrier's successive readings into interval samples. It
// is used by one goroutine (the heartbeat pass that reads the carrier).
type Window struct {
	base   Counters
	baseAt time.Time
	has    bool
}

// Next takes the reading c made at at and judges the interval since the
// window's base.
func (w *Window) Next(at time.Time, c Counters) (Sample, Verdict) {
	if !w.has || c.Carrier != w.base.Carrier || c.Family != w.base.Family || regressed(w.base, c) || at.Before(w.baseAt) {
		w.rebase(at, c)
		return Sample{}, Unknown
	}
	span := at.Sub(w.baseAt)
	if span < MinInterval {
		return Sample{}, Accumulating
	}
	b := w.base
	s := Sample{
		Start:         w.baseAt,
		End:           at,
		Family:        c.Family,
		RTT:           c.RTT,
		Payload:       c.Payload - b.Payload,
		Sent:          c.Sent - b.Sent,
		Datagrams:     c.Datagrams - b.Datagrams,
		Transmissions: c.Transmissions - b.Transmissions,
		Lost:          sub(c.Lost, b.Lost),
		LostBytes:     sub(c.LostBytes, b.LostBytes),
	}
	acked := c.Acked > b.Acked
	w.rebase(at, c)
	if span > MaxInterval || !acked || c.RTT <= 0 || (s.Payload < MinPayloadBytes && s.Datagrams < MinDatagrams) {
		return Sample{}, Unknown
	}
	return s, Active
}

// Reset forgets the base: the next reading starts a new interval.
func (w *Window) Reset() { *w = Window{} }

func (w *Window) rebase(at time.Time, c Counters) {
	w.base, w.baseAt, w.has = c, at, true
}

// regressed reports whether a counter that only grows fell: a different
// carrier under the same name, read as a new one.
func regressed(b, c Counters) bool {
	return c.Acked < b.Acked || c.Payload < b.Payload || c.Sent < b.Sent ||
		c.Datagrams < b.Datagrams || c.Transmissions < b.Transmissions
}

// sub is a-b, or 0 when b is larger (QUIC's lost counters fall back).
func sub(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}
