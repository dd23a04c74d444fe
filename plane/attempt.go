package plane

import (
	"errors"
	"time"
)

// Attempt is per-flow evidence work a chooser attached to a selection (a
// Score group's attempt on the leaf it chose). The dialer begins it at
// the flow's first admitted physical attempt or immediately before a
// logical open on a reused session, and ends the Report with the flow;
// a selection never dialed is Released.
type Attempt interface {
	// Begin rechecks the plan and starts the flow's report; an error is
	// a typed refusal (the plan went stale): the flow is refused, never
	// dialed for free.
	Begin(at time.Time) (Report, error)
	// Release drops an unbegun attempt (refunding what it reserved).
	Release(at time.Time)
}

// Report is one begun Attempt: what the flow's I/O boundary observes.
// Exactly one of Settle, Fail and Cancel ends it; later calls are
// ignored.
type Report interface {
	Setup(at time.Time)                  // the proxy session is set up
	Response(at time.Time)               // the first response byte
	Progress(at time.Time, tx, rx int64) // bytes accepted up and delivered down since the last call
	Settle(at time.Time)                 // ended without a failure
	Fail(at time.Time, err error)        // ended by an upstream failure (the implementation classifies err)
	Cancel(at time.Time)                 // ended neutrally: client side, rejection, shutdown
}

// ErrNoResponse is the Fail of a flow whose upstream ended its stream
// cleanly after the client's data was sent and before any response byte:
// a silent target (a path that swallows what it is sent). For Score it is
// an I/O failure of the flow's target; health classifies the end itself.
var ErrNoResponse = errors.New("the upstream ended the stream before any response to what the client sent")

// Attempts are the attempts of one selection, one per Score group the
// walk traversed (nested groups each attribute the leaf's outcome).
type Attempts struct {
	a [MaxGroupDepth]Attempt
	n int
}

// Add appends a; past the bound it is released at once.
func (as *Attempts) Add(a Attempt, at time.Time) {
	if as.n == len(as.a) {
		a.Release(at)
		return
	}
	as.a[as.n] = a
	as.n++
}

// Len is the number of attempts held.
func (as *Attempts) Len() int { return as.n }

// At is the i-th attempt.
func (as *Attempts) At(i int) Attempt { return as.a[i] }

// Reset forgets the attempts (without releasing them).
func (as *Attempts) Reset() {
	clear(as.a[:as.n])
	as.n = 0
}

// Release releases every attempt held and forgets them.
func (as *Attempts) Release(at time.Time) {
	for _, a := range as.a[:as.n] {
		a.Release(at)
	}
	as.Reset()
}
