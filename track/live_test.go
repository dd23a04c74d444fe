package track_test

import (
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"switchyard/track"
)

func liveIDs(tb track.Table) []uint64 {
	ids := make([]uint64, len(tb.Entries))
	for i, e := range tb.Entries {
		ids[i] = e.ID()
	}
	return ids
}

func flowIDs(tr *track.Tracker) []uint64 {
	var ids []uint64
	for _, f := range tr.Flows() {
		ids = append(ids, f.ID)
	}
	return ids
}

// The index lists the live flows ordered by id, through closes in any
// order and the compactions they cause, as the map does.
func TestLiveIsOrderedAndMatchesFlows(t *testing.T) {
	tr := track.New()
	var conns []*track.Conn
	for range 500 {
		conns = append(conns, tr.Conn(tcpMeta(), &countConn{}))
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	rnd.Shuffle(len(conns), func(i, j int) { conns[i], conns[j] = conns[j], conns[i] })
	for i, c := range conns[:450] {
		c.Close()
		if i%37 == 0 {
			tb := tr.Live(nil)
			if got, want := liveIDs(tb), flowIDs(tr); !slices.Equal(got, want) {
				t.Fatalf("after %d closes: live %v, flows %v", i+1, got, want)
			}
		}
	}
	// New flows after the holes still come last, in order.
	for range 10 {
		conns = append(conns, tr.Conn(tcpMeta(), &countConn{}))
	}
	tb := tr.Live(make([]track.Entry, 3))
	ids := liveIDs(tb)
	if len(ids) != 60 || !slices.IsSorted(ids) || !slices.Equal(ids, flowIDs(tr)) {
		t.Fatalf("live %v", ids)
	}
	if tb.Last != 510 || tb.ClosedSeq != 450 {
		t.Fatalf("last %d, closed %d", tb.Last, tb.ClosedSeq)
	}
	for _, c := range conns[450:] {
		c.Close()
	}
	if tb := tr.Live(nil); len(tb.Entries) != 0 || tb.ClosedSeq != 510 {
		t.Fatalf("after every close: %d live, %d closed", len(tb.Entries), tb.ClosedSeq)
	}
}

// A closed flow's final counts are in the log and in the totals; a reader
// that fell behind the log is told so.
func TestClosedLogAndTotals(t *testing.T) {
	tr := track.New()
	a := tr.Conn(tcpMeta(), &countConn{})
	b := tr.Conn(tcpMeta(), &countConn{})
	a.Write(make([]byte, 10))
	a.Read(make([]byte, 3))
	b.Write(make([]byte, 1))
	before := tr.Live(nil)
	if up, down := before.Totals(); up != 11 || down != 3 {
		t.Fatalf("totals %d %d", up, down)
	}
	a.Write(make([]byte, 5)) // after the look, before the close
	a.Close()
	if !tr.Kill(b.ID()) {
		t.Fatal("no kill")
	}
	after := tr.Live(nil)
	if len(after.Entries) != 0 || after.ClosedSeq != before.ClosedSeq+2 {
		t.Fatalf("after: %+v", after)
	}
	if up, down := after.Totals(); up != 16 || down != 3 {
		t.Fatalf("totals after the closes %d %d", up, down)
	}
	closed, ok := tr.ClosedSince(before.ClosedSeq, after.ClosedSeq, nil)
	want := []track.Closed{{ID: a.ID(), Up: 15, Down: 3}, {ID: b.ID(), Up: 1}}
	if !ok || !slices.Equal(closed, want) {
		t.Fatalf("closed %+v %v, want %+v", closed, ok, want)
	}
	if c, ok := tr.ClosedSince(after.ClosedSeq, after.ClosedSeq, closed); !ok || len(c) != 0 {
		t.Fatalf("nothing new: %v %v", c, ok)
	}
	if _, ok := tr.ClosedSince(0, after.ClosedSeq+1, nil); ok {
		t.Fatal("a sequence ahead of the log")
	}

	// Overflow: a reader more than ClosedLogSize closes behind.
	seq := after.ClosedSeq
	for range track.ClosedLogSize {
		tr.Conn(tcpMeta(), &countConn{}).Close()
	}
	now := tr.Live(nil).ClosedSeq
	if got, ok := tr.ClosedSince(seq, now, nil); !ok || len(got) != track.ClosedLogSize {
		t.Fatalf("exactly the log's size behind: %d %v", len(got), ok)
	}
	tr.Conn(tcpMeta(), &countConn{}).Close()
	if _, ok := tr.ClosedSince(seq, now+1, nil); ok {
		t.Fatal("a reader past the log's bound was not told")
	}
}

func TestMemo(t *testing.T) {
	tr := track.New()
	c := tr.Conn(tcpMeta(), &countConn{})
	defer c.Close()
	e := tr.Live(nil).Entries[0]
	if e.Memo() != nil {
		t.Fatal("a memo before any")
	}
	e.SetMemo("rendered")
	if got := tr.Live(nil).Entries[0].Memo(); got != "rendered" {
		t.Fatalf("memo %v", got)
	}
	if e.Meta().Inbound != "socks-in" || e.Start().IsZero() || e.ID() != c.ID() {
		t.Fatalf("entry %+v", e)
	}
}

// Looks taken while flows open and close are each consistent: every flow
// a look listed is, in the next, either listed or among the closes in
// between, and every close in between was of a flow the first look
// listed or of one registered after it.
func TestLiveLooksAreConsistent(t *testing.T) {
	tr := track.New()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range 4 {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(w), 9))
			var open []*track.Conn
			for {
				select {
				case <-stop:
					for _, c := range open {
						c.Close()
					}
					return
				default:
				}
				if len(open) < 50 && rnd.IntN(2) == 0 {
					c := tr.Conn(tcpMeta(), &countConn{})
					c.Write(make([]byte, 1+rnd.IntN(9)))
					open = append(open, c)
				} else if len(open) > 0 {
					i := rnd.IntN(len(open))
					open[i].Close()
					open = slices.Delete(open, i, i+1)
				}
			}
		})
	}
	prev := tr.Live(nil)
	var closed []track.Closed
	for range 300 {
		next := tr.Live(nil)
		var ok bool
		closed, ok = tr.ClosedSince(prev.ClosedSeq, next.ClosedSeq, closed)
		if !ok {
			t.Fatal("fell behind a log of 8192 with 200 flows at most")
		}
		gone := map[uint64]bool{}
		for _, c := range closed {
			gone[c.ID] = true
		}
		listed := map[uint64]bool{}
		for _, e := range next.Entries {
			listed[e.ID()] = true
		}
		before := map[uint64]bool{}
		for _, e := range prev.Entries {
			before[e.ID()] = true
			if !listed[e.ID()] && !gone[e.ID()] {
				t.Fatalf("flow %d vanished without a close", e.ID())
			}
		}
		for _, c := range closed {
			if !before[c.ID] && c.ID <= prev.Last {
				t.Fatalf("a close of flow %d the first look should have listed", c.ID)
			}
		}
		for _, e := range next.Entries {
			if !before[e.ID()] && e.ID() <= prev.Last {
				t.Fatalf("flow %d is new to the second look but not newer than the first", e.ID())
			}
		}
		prev = next
	}
	close(stop)
	wg.Wait()
}
