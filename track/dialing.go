package track

import (
	"sync"
	"time"
)

// A dial in progress is in the table too, apart from the flows: a client
// waiting on a silent server holds descriptors and a handshake well before
// its flow exists. The table is bounded by the dials in progress, which
// dial admission bounds in turn.

// Dialing is one dial in progress, listed until End.
type Dialing struct {
	t    *Tracker
	id   uint64
	once sync.Once
}

// DialSnapshot is a dial in progress: what it was routed to and when it
// began. Its ids are their own, apart from the flows'.
type DialSnapshot struct {
	ID uint64
	Meta
	Start time.Time
}

type dialTable struct {
	mu    sync.Mutex // guards dials and last
	dials map[uint64]DialSnapshot
	last  uint64
}

// BeginDial lists a dial that starts now, routed as m says.
func (t *Tracker) BeginDial(m Meta) *Dialing {
	d := &t.dials
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dials == nil {
		d.dials = make(map[uint64]DialSnapshot)
	}
	d.last++
	d.dials[d.last] = DialSnapshot{ID: d.last, Meta: m, Start: time.Now()}
	return &Dialing{t: t, id: d.last}
}

// End takes the dial off the list, whatever its outcome; later calls do
// nothing.
func (g *Dialing) End() {
	g.once.Do(func() {
		d := &g.t.dials
		d.mu.Lock()
		delete(d.dials, g.id)
		d.mu.Unlock()
	})
}

// Dials returns the dials in progress ordered by id.
func (t *Tracker) Dials() []DialSnapshot {
	d := &t.dials
	return byID(&d.mu, d.dials, func(s DialSnapshot) DialSnapshot { return s }, func(s DialSnapshot) uint64 { return s.ID })
}

// DialsInProgress is the number of dials in progress.
func (t *Tracker) DialsInProgress() int {
	d := &t.dials
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.dials)
}

// Open is the number of live flows and dials in progress.
func (t *Tracker) Open() int {
	t.mu.Lock()
	n := len(t.flows)
	t.mu.Unlock()
	return n + t.DialsInProgress()
}
