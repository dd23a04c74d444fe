package api

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"switchyard/track"
)

// GET /switchyard/v1/connections is the connection table as a stream of
// changes, for clients that hold thousands of flows: the first message is
// the whole table ("type":"snapshot"), every later one ("type":"delta")
// only what changed since the message before:
//
//	{"type":"delta","new":[entry…],"update":[{"id","upload","download"}…],
//	 "closed":[{"id","upload","download"}…],"uploadTotal":…,"downloadTotal":…}
//
// new holds full entries in Clash's /connections shape; update the flows
// whose counters moved (no other field of a flow ever changes); closed the
// flows the client was told of that are gone, with their final counters.
// A flow opened and closed between two messages is in neither list (its
// bytes are in the totals). A client so slow that more closes happened
// between two of its messages than the tracker logs
// (track.ClosedLogSize) is sent a snapshot again, which replaces its
// table. A WebSocket, or without an upgrade a chunked stream of JSON
// lines; a message every ?interval= ms (100..60000, default 1000).
//
// A message costs one pass over the open flows' counters (two atomic
// loads each, no allocation) plus the rendering of what changed: the
// unchanged flows are never rendered, and a new flow's fixed part is
// rendered once for every reader (the memo GET /connections keeps).

const (
	deltaIntervalMin     = 100 * time.Millisecond
	deltaIntervalMax     = 60 * time.Second
	deltaIntervalDefault = time.Second
)

// seen is a flow as the client was last told of it.
type seen struct {
	id       uint64
	up, down int64
}

// deltaFeed is one subscriber's view: what it was told, and its buffers,
// all bounded by the number of open flows and reused from message to
// message.
type deltaFeed struct {
	s      *Server
	synced bool   // a snapshot was sent
	last   uint64 // track.Table.Last at the previous message
	seq    uint64 // track.Table.ClosedSeq at the previous message
	told   []seen // ordered by id: the open flows the client knows, with their counters

	entries []track.Entry
	next    []seen
	news    []int32 // indexes into entries
	updates []int32
	closed  []track.Closed
}

func newDeltaFeed(s *Server) *deltaFeed { return &deltaFeed{s: s} }

// message writes the next message to w.
func (f *deltaFeed) message(w io.Writer) error {
	sc := getScratch(w)
	defer sc.put()
	tr := f.s.b.Tracker()
	tb := tr.Live(f.entries)
	f.entries = tb.Entries
	if f.synced {
		var ok bool
		f.closed, ok = tr.ClosedSince(f.seq, tb.ClosedSeq, f.closed)
		if ok {
			f.delta(sc, &tb)
			return sc.err
		}
	}
	f.snapshot(sc, &tb)
	return sc.err
}

// adopt makes next what the client knows after this message.
func (f *deltaFeed) adopt(tb *track.Table) {
	f.told, f.next = f.next, f.told[:0]
	f.last, f.seq, f.synced = tb.Last, tb.ClosedSeq, true
	clear(f.entries) // hold no flow past the message
}

func (f *deltaFeed) snapshot(sc *scratch, tb *track.Table) {
	f.next = f.next[:0]
	up, down := tb.ClosedUp, tb.ClosedDown
	sc.out = append(sc.out, `{"type":"snapshot","connections":[`...)
	for i, e := range tb.Entries {
		if i > 0 {
			sc.out = append(sc.out, ',')
		}
		u, d := e.Bytes()
		up += u
		down += d
		f.next = append(f.next, seen{e.ID(), u, d})
		sc.out = f.s.appendConn(sc.out, e, u, d)
		sc.spill()
	}
	sc.out = append(sc.out, ']')
	appendTotals(sc, up, down)
	f.adopt(tb)
}

// delta walks the open flows against what the client knows, both ordered
// by id: a flow newer than the previous message is new, one the client
// knows is updated when its counters moved.
func (f *deltaFeed) delta(sc *scratch, tb *track.Table) {
	f.next, f.news, f.updates = f.next[:0], f.news[:0], f.updates[:0]
	up, down := tb.ClosedUp, tb.ClosedDown
	told := f.told
	for i, e := range tb.Entries {
		id := e.ID()
		u, d := e.Bytes()
		up += u
		down += d
		f.next = append(f.next, seen{id, u, d})
		if id > f.last {
			f.news = append(f.news, int32(i))
			continue
		}
		for len(told) > 0 && told[0].id < id {
			told = told[1:] // gone: in the closed log
		}
		if len(told) == 0 || told[0].id != id {
			// Not known though not newer: cannot happen with the
			// tracker's consistent looks; tell it as new all the same.
			f.news = append(f.news, int32(i))
			continue
		}
		if told[0].up != u || told[0].down != d {
			f.updates = append(f.updates, int32(i))
		}
		told = told[1:]
	}

	sc.out = append(sc.out, `{"type":"delta","new":[`...)
	for n, i := range f.news {
		if n > 0 {
			sc.out = append(sc.out, ',')
		}
		s := f.next[i]
		sc.out = f.s.appendConn(sc.out, tb.Entries[i], s.up, s.down)
		sc.spill()
	}
	sc.out = append(sc.out, `],"update":[`...)
	for n, i := range f.updates {
		if n > 0 {
			sc.out = append(sc.out, ',')
		}
		s := f.next[i]
		sc.out = append(sc.out, `{"id":`...)
		sc.out = append(sc.out, f.s.render(tb.Entries[i]).id...)
		sc.out = appendCounts(sc.out, s.up, s.down)
		sc.spill()
	}
	sc.out = append(sc.out, `],"closed":[`...)
	first := true
	for _, c := range f.closed {
		if c.ID > f.last {
			continue // opened and closed since the previous message: never told
		}
		if !first {
			sc.out = append(sc.out, ',')
		}
		first = false
		sc.out = append(sc.out, `{"id":"`...)
		sc.out = strconv.AppendUint(sc.out, c.ID, 10)
		sc.out = append(sc.out, '"')
		sc.out = appendCounts(sc.out, c.Up, c.Down)
		sc.spill()
	}
	sc.out = append(sc.out, ']')
	appendTotals(sc, up, down)
	f.adopt(tb)
}

// appendTotals ends a message with the byte totals.
func appendTotals(sc *scratch, up, down int64) {
	sc.out = append(sc.out, `,"uploadTotal":`...)
	sc.out = strconv.AppendInt(sc.out, up, 10)
	sc.out = append(sc.out, `,"downloadTotal":`...)
	sc.out = strconv.AppendInt(sc.out, down, 10)
	sc.out = append(sc.out, "}\n"...)
	sc.flush()
}

// parseDeltaInterval reads ?interval= in milliseconds.
func parseDeltaInterval(v string) (time.Duration, error) {
	if v == "" {
		return deltaIntervalDefault, nil
	}
	ms, err := strconv.ParseUint(v, 10, 31)
	d := time.Duration(ms) * time.Millisecond
	if err != nil || d < deltaIntervalMin || d > deltaIntervalMax {
		return 0, fmt.Errorf("interval must be a whole number of milliseconds from %d to %d", deltaIntervalMin.Milliseconds(), deltaIntervalMax.Milliseconds())
	}
	return d, nil
}

// nativeConnections is GET /switchyard/v1/connections.
func (s *Server) nativeConnections(w http.ResponseWriter, r *http.Request) {
	every, err := parseDeltaInterval(r.URL.Query().Get("interval"))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	f := newDeltaFeed(s)
	if isUpgrade(r) {
		s.serveWSWith(w, r, every, f.message)
		return
	}
	s.serveChunkedWith(w, r, every, f.message)
}
