package track

import (
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// meter is the part every tracked flow shares: its entry in the table, its
// counters and its one-time close.
type meter struct {
	t     *Tracker
	id    uint64
	meta  Meta
	start time.Time

	up, down atomic.Int64
	acc      *ended      // its key's totals (totals.go); guarded by t.mu
	closed   atomic.Bool // set before the inner conn or link is closed
	killed   atomic.Bool // set before closed when the tracker killed the flow

	// sess is the session the flow is filed under and user its user's
	// entry, nil for a flow of none. When charge is set, every byte counted
	// on the flow counts toward sess and user too. done is closed when the
	// flow closes, to end a pacing pause; it exists only with a user.
	sess   *Session
	user   *user
	charge bool
	done   chan struct{}

	memo atomic.Pointer[memo] // a reader's, kept with the flow (Entry.SetMemo)

	inner    io.Closer
	once     sync.Once
	closeErr error
}

// file files the flow under s; its bytes count toward s when charged.
func (m *meter) file(s *Session, charged bool) {
	m.sess, m.user, m.charge = s, s.user, charged
	m.done = make(chan struct{})
	s.flows.Add(1)
}

// addUp counts n bytes toward the destination.
func (m *meter) addUp(n int64) {
	m.up.Add(n)
	if m.charge {
		m.sess.up.Add(n)
		m.user.up.Add(n)
	}
}

// addDown counts n bytes from the destination.
func (m *meter) addDown(n int64) {
	m.down.Add(n)
	if m.charge {
		m.sess.down.Add(n)
		m.user.down.Add(n)
	}
}

// paceUp and paceDown wait out the pause n bytes moved cost under the
// user's rate; a flow of no session is never paced.
func (m *meter) paceUp(n int64) error {
	if m.user == nil {
		return nil
	}
	return m.pace(&m.user.upPace, n)
}

func (m *meter) paceDown(n int64) error {
	if m.user == nil {
		return nil
	}
	return m.pace(&m.user.downPace, n)
}

// step bounds what a mover moves at once in a direction; 0: no bound.
func (m *meter) step(read bool) int64 {
	switch {
	case m.user == nil:
		return 0
	case read:
		return m.user.downPace.step()
	}
	return m.user.upPace.step()
}

func (m *meter) snapshot() Snapshot {
	return Snapshot{ID: m.id, Meta: m.meta, Start: m.start, Up: m.up.Load(), Down: m.down.Load()}
}

// close closes the inner conn or link and unregisters the flow, once. A
// call while another runs the close waits for it to return.
func (m *meter) close() error {
	m.once.Do(m.shut)
	return m.closeErr
}

// shut leaves the flow in the table until the inner close has returned, so
// an Interrupt that comes meanwhile finds it and waits for that close.
func (m *meter) shut() {
	m.closed.Store(true)
	if m.sess != nil {
		m.sess.flows.Add(-1)
		close(m.done)
	}
	m.closeErr = m.inner.Close()
	m.t.remove(m)
}

// interrupt closes the flow as killed and reports whether this call closed
// it; when another close ran or runs, it waits for that one and reports
// false.
func (m *meter) interrupt() (closed bool) {
	m.once.Do(func() {
		closed = true
		m.killed.Store(true) // before the close, so its owner sees ErrKilled
		m.shut()
	})
	return closed
}

func (m *meter) kill() { m.interrupt() }

// err is what a failed read or write reports: ErrKilled for a killed flow,
// the inner error otherwise.
func (m *meter) err(err error) error {
	if err != nil && m.killed.Load() {
		return ErrKilled
	}
	return err
}
