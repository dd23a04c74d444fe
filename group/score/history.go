package score

import (
	"sync"

	"switchyard/health"
	"switchyard/netx"
)

// Switch history constants.
const (
	// HistoryEntries bounds the (group, network, family, target) switch
	// history, an LRU: unknown or evicted history proves no switch.
	HistoryEntries = 4096
	// FlapWindow is how many ordinary selections after a switch a return
	// to the prior winner counts as a flap.
	FlapWindow = 8
)

type histKey struct {
	group GroupID
	net   netx.Network
	fam   netx.Family
	tgt   target
}

type histEntry struct {
	key        histKey
	last, prev health.NodeID
	hasPrev    bool
	since      int  // ordinary selections since the latest switch
	live       bool // in the table (an evicted entry is never reused)
	newer      *histEntry
	older      *histEntry
}

// history is the ordinary-selection history: the incumbent of each
// (group, network, family, target) and what a switch and a flap are.
type history struct {
	mu   sync.Mutex
	m    map[histKey]*histEntry
	head histEntry // head.older is the most recent, head.newer the least
}

func newHistory() *history {
	h := &history{m: make(map[histKey]*histEntry)}
	h.head.newer, h.head.older = &h.head, &h.head
	return h
}

// incumbent returns the committed ordinary winner of k, without
// refreshing it, and its entry: a hint for the rank's commit.
func (h *history) incumbent(k histKey) (health.NodeID, *histEntry, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e := h.m[k]; e != nil {
		return e.last, e, true
	}
	return health.NodeID{}, nil, false
}

// commit records an ordinary selection of node for k: switched when it
// changes a known incumbent, flap when it returns to the prior winner
// within FlapWindow ordinary selections of the switch away from it.
//
// hint is k's entry as the rank read it (nil: none), saving the lookup
// while it is still in the table.
func (h *history) commit(k histKey, node health.NodeID, hint *histEntry) (switched, flap bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e := hint
	if e == nil || !e.live || e.key != k {
		e = h.m[k]
	}
	if e == nil {
		if len(h.m) >= HistoryEntries {
			old := h.head.newer
			h.unlink(old)
			old.live = false
			delete(h.m, old.key)
		}
		e = &histEntry{key: k, last: node, live: true}
		h.m[k] = e
		h.push(e)
		return false, false
	}
	h.unlink(e)
	h.push(e)
	if e.last == node {
		e.since++
		return false, false
	}
	flap = e.hasPrev && e.prev == node && e.since < FlapWindow
	e.prev, e.hasPrev, e.last, e.since = e.last, true, node, 0
	return true, flap
}

func (h *history) len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.m)
}

func (h *history) unlink(e *histEntry) {
	e.newer.older, e.older.newer = e.older, e.newer
}

func (h *history) push(e *histEntry) {
	e.older, e.newer = h.head.older, &h.head
	h.head.older.newer = e
	h.head.older = e
}
