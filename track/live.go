package track

import (
	"slices"
	"time"
)

// The live index: what readers that follow the table over time (the
// API's connection streams) walk without copying metas or hashing ids.
// Beside the map by id, the tracker keeps its live flows in a slice
// ordered by id (ids only grow, so a new flow is appended), the bytes of
// every closed flow summed, and a log of the latest closes, each with its
// final counts and a sequence number. All of it changes under the
// tracker's lock, in add and remove, which run once per flow; nothing on
// a flow's byte path touches it.

// ClosedLogSize bounds the log of closed flows: a reader that looks less
// often than this many closes happen has lost some (ClosedSince says so)
// and must start over from a full listing.
const ClosedLogSize = 8192

// Entry is a live flow as a reader walks the table: its fixed facts,
// shared with the table, and its counters, read when asked.
type Entry struct{ m *meter }

// ID is the flow's id.
func (e Entry) ID() uint64 { return e.m.id }

// Meta is the flow's routing facts, shared with the table: never modify
// them.
func (e Entry) Meta() *Meta { return &e.m.meta }

// Start is when the flow was registered.
func (e Entry) Start() time.Time { return e.m.start }

// Bytes reads the flow's counters now: up toward the destination, down
// from it.
func (e Entry) Bytes() (up, down int64) { return e.m.up.Load(), e.m.down.Load() }

// Memo is what a reader derived from the flow's fixed facts and kept with
// it (SetMemo), or nil.
func (e Entry) Memo() any {
	if p := e.m.memo.Load(); p != nil {
		return p.v
	}
	return nil
}

// SetMemo keeps v with the flow for later readers, replacing what was
// kept; it goes when the flow leaves the table. Readers keep there what
// only depends on the flow's fixed facts (a rendering of them), so that
// walking the table again costs no work per flow beyond the counters.
func (e Entry) SetMemo(v any) { e.m.memo.Store(&memo{v}) }

type memo struct{ v any }

// Closed is a flow gone from the table, with its final counts.
type Closed struct {
	ID       uint64
	Up, Down int64
}

// Table is one consistent look at the live table: every flow with an id
// up to Last is either in Entries or among the first ClosedSeq closes.
type Table struct {
	Entries []Entry // ordered by id
	// Last is the id of the latest flow registered (0: none yet).
	Last uint64
	// ClosedSeq counts the flows closed so far: the sequence number of the
	// latest close in the log.
	ClosedSeq uint64
	// ClosedUp and ClosedDown are the bytes of every flow closed so far.
	ClosedUp, ClosedDown int64
}

// Totals adds the live flows' counters, read now, to the closed flows'
// bytes: every byte the table has counted, gone flows' included.
func (tb *Table) Totals() (up, down int64) {
	up, down = tb.ClosedUp, tb.ClosedDown
	for _, e := range tb.Entries {
		u, d := e.Bytes()
		up += u
		down += d
	}
	return up, down
}

// live is the tracker's ordered index and closed log, guarded by
// Tracker.mu.
type live struct {
	order []slot // ordered by id; m is nil once the flow is gone
	holes int    // slots of order whose m is nil

	closedUp, closedDown int64
	seq                  uint64   // closes so far
	log                  []Closed // a ring of ClosedLogSize, made at the first close
}

type slot struct {
	id uint64
	m  *meter
}

// Live appends the live flows, ordered by id, to buf[:0] and returns them
// with the table's counts, all read at one moment. A reader that keeps
// its buffer between looks allocates nothing once it is big enough.
func (t *Tracker) Live(buf []Entry) Table {
	t.mu.Lock()
	defer t.mu.Unlock()
	lv := &t.live
	tb := Table{Entries: buf[:0], Last: t.last, ClosedSeq: lv.seq, ClosedUp: lv.closedUp, ClosedDown: lv.closedDown}
	tb.Entries = slices.Grow(tb.Entries, len(lv.order)-lv.holes)
	for _, s := range lv.order {
		if s.m != nil {
			tb.Entries = append(tb.Entries, Entry{s.m})
		}
	}
	return tb
}

// ClosedSince appends to buf[:0] the closes after the from-th up to the
// to-th (Table.ClosedSeq of two looks), oldest first. ok is false when
// the log no longer holds all of them (or to is ahead of the log): the
// reader has fallen behind and must start over from Live.
func (t *Tracker) ClosedSince(from, to uint64, buf []Closed) (out []Closed, ok bool) {
	out = buf[:0]
	if to <= from {
		return out, to == from
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	lv := &t.live
	if to > lv.seq || lv.seq-from > ClosedLogSize {
		return out, false
	}
	for n := from + 1; n <= to; n++ {
		out = append(out, lv.log[(n-1)%ClosedLogSize])
	}
	return out, true
}

// index appends m to the ordered index; under t.mu, with m.id the newest.
func (lv *live) index(m *meter) { lv.order = append(lv.order, slot{m.id, m}) }

// unindex takes m out of the index and logs its close with its counts as
// they stand; under t.mu, once per flow.
func (lv *live) unindex(m *meter) {
	i, found := slices.BinarySearchFunc(lv.order, m.id, func(s slot, id uint64) int {
		switch {
		case s.id < id:
			return -1
		case s.id > id:
			return 1
		}
		return 0
	})
	if !found || lv.order[i].m == nil {
		return
	}
	lv.order[i].m = nil
	lv.holes++
	if lv.holes > 64 && lv.holes*2 > len(lv.order) {
		lv.compact()
	}
	c := Closed{ID: m.id, Up: m.up.Load(), Down: m.down.Load()}
	lv.closedUp += c.Up
	lv.closedDown += c.Down
	if lv.log == nil {
		lv.log = make([]Closed, ClosedLogSize)
	}
	lv.log[lv.seq%ClosedLogSize] = c
	lv.seq++
}

// compact drops the holes, and the spare capacity when most is unused.
func (lv *live) compact() {
	kept := lv.order[:0]
	for _, s := range lv.order {
		if s.m != nil {
			kept = append(kept, s)
		}
	}
	clear(lv.order[len(kept):])
	lv.order, lv.holes = kept, 0
	if cap(lv.order) > 1024 && len(lv.order) < cap(lv.order)/4 {
		lv.order = slices.Clip(slices.Clone(lv.order))
	}
}
