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

// ended is what the flows of one key that left the table moved.
type ended struct {
	flows    uint64
	up, down int64
}

// OutboundTag is the tag of an outbound version ("hk@v2" → "hk").
func OutboundTag(version string) string {
	if i := strings.LastIndex(version, "@v"); i >= 0 {
		return version[:i]
	}
	return version
}

func keyOf(m *Meta) totalsKey {
	return totalsKey{network: m.Network, inbound: m.Inbound, outbound: OutboundTag(m.Outbound)}
}

// dropLocked takes m out of the table and adds what it moved to its key's
// ended totals. t.mu is held.
func (t *Tracker) dropLocked(m *meter) {
	delete(t.flows, m.id)
	if t.ended == nil {
		t.ended = make(map[totalsKey]*ended)
	}
	k := keyOf(&m.meta)
	e := t.ended[k]
	if e == nil {
		e = &ended{}
		t.ended[k] = e
	}
	e.flows++
	e.up += m.up.Load()
	e.down += m.down.Load()
}

// Totals reads the totals of every key that has a live flow or an ended
// one, in no particular order. It holds the table's lock over one pass of
// the live flows.
func (t *Tracker) Totals() []Totals {
	t.mu.Lock()
	defer t.mu.Unlock()
	idx := make(map[totalsKey]int, len(t.ended))
	out := make([]Totals, 0, len(t.ended))
	at := func(k totalsKey) *Totals {
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, Totals{Network: k.network, Inbound: k.inbound, Outbound: k.outbound})
		}
		return &out[i]
	}
	for k, e := range t.ended {
		s := at(k)
		s.Flows, s.Up, s.Down = e.flows, e.up, e.down
	}
	for _, m := range t.flows {
		s := at(keyOf(&m.meta))
		s.Open++
		s.Flows++
		s.Up += m.up.Load()
		s.Down += m.down.Load()
	}
	return out
}

// Forget drops the ended totals of every (inbound, outbound tag) keep
// refuses: after a reload removed an inbound or an outbound, its totals
// start over if it comes back. Live flows are not touched. It bounds the
// ended totals by what the configuration names.
func (t *Tracker) Forget(keep func(inbound, outbound string) bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k := range t.ended {
		if !keep(k.inbound, k.outbound) {
			delete(t.ended, k)
		}
	}
}
