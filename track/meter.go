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
	closed   atomic.Bool // set before the inner conn or link is closed
	killed   atomic.Bool // set before closed when the tracker killed the flow

	inner    io.Closer
	once     sync.Once
	closeErr error
}

func (m *meter) snapshot() Snapshot {
	return Snapshot{ID: m.id, Meta: m.meta, Start: m.start, Up: m.up.Load(), Down: m.down.Load()}
}

// close unregisters the flow and closes the inner conn or link, once.
func (m *meter) close() error {
	m.once.Do(func() {
		m.closed.Store(true)
		m.t.remove(m.id)
		m.closeErr = m.inner.Close()
	})
	return m.closeErr
}

func (m *meter) kill() {
	m.killed.Store(true)
	m.close()
}

// err is what a failed read or write reports: ErrKilled for a killed flow,
// the inner error otherwise.
func (m *meter) err(err error) error {
	if err != nil && m.killed.Load() {
		return ErrKilled
	}
	return err
}
