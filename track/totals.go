package track

import (
	"strings"

	"switchyard/netx"
)

// Totals are the flows and bytes of one (network, inbound, outbound tag)
// since the tracker was made or the tag was last forgotten: those of the
// flows that ended and those of the live ones. Read together under the
// table's lock, every flow counts exactly once, in Open or among the ended:
// Flows, Up and Down never go back between two reads (bytes a flow moves
// after it left the table are not counted).
type Totals struct {
	Network  netx.Network
	Inbound  string
	Outbound string // the outbound tag, without its version
	Open     int    // live flows
	Flows    uint64 // flows registered: the ended and the live
	Up, Down int64
}

// totalsKey is what the totals are kept by.
type totalsKey struct {
	network  netx.Network
	inbound  string
	outbound string
}

// ended is one key's totals: what its flows that left the table moved,
// and how many are live (each live meter points to its key's entry, so a
// pass of the table hashes nothing). liveUp and liveDown are the scratch
// of one Totals pass. Guarded by the tracker's mu.
type ended struct {
	key              totalsKey
	flows            uint64 // flows that left
	up, down         int64
	live             int
	liveUp, liveDown int64
}

// OutboundTag is the tag of an outbound version ("hk@v2" → "hk").
func OutboundTag(version string) string {
	if i := strings.LastIndex(version, "@v"); i >= 0 {
		return version[:i]
	}
	return version
}

// enterLocked files m, just added to the table, under its key's totals.
// t.mu is held.
func (t *Tracker) enterLocked(m *meter) {
	k := totalsKey{network: m.meta.Network, inbound: m.meta.Inbound, outbound: OutboundTag(m.meta.Outbound)}
	if t.ended == nil {
		t.ended = make(map[totalsKey]*ended)
	}
	e := t.ended[k]
	if e == nil {
		e = &ended{key: k}
		t.ended[k] = e
	}
	e.live++
	m.acc = e
}

// dropLocked takes m out of the table and adds what it moved to its key's
// totals. t.mu is held.
func (t *Tracker) dropLocked(m *meter) {
	delete(t.flows, m.id)
	e := m.acc
	e.live--
	e.flows++
	e.up += m.up.Load()
	e.down += m.down.Load()
}

// Totals reads the totals of every key that has a live flow or an ended
// one, in no particular order. It holds the table's lock over one pass of
// the live flows, which reads two counters of each.
func (t *Tracker) Totals() []Totals {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, m := range t.flows {
		m.acc.liveUp += m.up.Load()
		m.acc.liveDown += m.down.Load()
	}
	out := make([]Totals, 0, len(t.ended))
	for _, e := range t.ended {
		out = append(out, Totals{
			Network: e.key.network, Inbound: e.key.inbound, Outbound: e.key.outbound,
			Open: e.live, Flows: e.flows + uint64(e.live), Up: e.up + e.liveUp, Down: e.down + e.liveDown,
		})
		e.liveUp, e.liveDown = 0, 0
	}
	return out
}

// Forget drops the ended totals of every (inbound, outbound tag) keep
// refuses: after a reload removed an inbound or an outbound, its totals
// start over if it comes back. A key with live flows (draining ones) is
// kept until a later Forget finds it without. It bounds the totals by
// what the configuration names.
func (t *Tracker) Forget(keep func(inbound, outbound string) bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, e := range t.ended {
		if e.live == 0 && !keep(k.inbound, k.outbound) {
			delete(t.ended, k)
		}
	}
}
