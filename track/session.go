package track

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// SessionInfo is what an inbound knows of an authenticated connection when
// it opens its session.
type SessionInfo struct {
	User    string
	Inbound string
	Source  netip.AddrPort
	// ChargeDatagrams makes the payload of the session's UDP sub-links count
	// toward its wire bytes: set by an inbound whose datagrams never cross
	// the session's connection (SOCKS5, whose UDP relay is a socket apart).
	ChargeDatagrams bool
}

// SessionSnapshot is one live session as it stands. Up and Down are its wire
// bytes: what its TCP flows carried across its connection (client to
// destination, and back), plus the payload of its UDP sub-links when it
// charges datagrams. The protocol's own handshake is not counted. Flows is
// how many of its flows are live.
type SessionSnapshot struct {
	ID uint64
	SessionInfo
	Start    time.Time
	Up, Down int64
	Flows    int
}

// Session is one authenticated connection of a user. Its flows are filed
// under it (their Meta.Session is its id) and count toward its wire bytes
// and its user's totals; its user's pacing applies to all of them. A
// session leaves the table when it ends; flows still running after that
// keep counting toward its user.
type Session struct {
	t     *Tracker
	id    uint64
	info  SessionInfo
	start time.Time
	user  *user

	up, down atomic.Int64
	flows    atomic.Int64
	once     sync.Once
}

// sessions is the table of live sessions; it holds no ended one.
type sessions struct {
	mu   sync.Mutex // guards live and last; never held across I/O
	live map[uint64]*Session
	last uint64 // the id given to the latest session; ids start at 1
}

// OpenSession starts the session of one authenticated connection; End ends
// it. A user the tracker has not been configured with (see SetUsers) gets a
// session all the same, unpaced, counted in no user's totals but its own
// entry's.
func (t *Tracker) OpenSession(info SessionInfo) *Session {
	u := t.users.lookup(info.User)
	if u == nil {
		u = newUser(info.User)
	}
	s := &Session{t: t, info: info, start: time.Now(), user: u}
	u.sessions.Add(1)
	ss := &t.sessions
	ss.mu.Lock()
	if ss.live == nil {
		ss.live = make(map[uint64]*Session)
	}
	ss.last++
	s.id = ss.last
	ss.live[s.id] = s
	ss.mu.Unlock()
	return s
}

// ID is the session's id; 0 for a nil session.
func (s *Session) ID() uint64 {
	if s == nil {
		return 0
	}
	return s.id
}

// Info is what the session was opened with; the zero SessionInfo for a nil
// session.
func (s *Session) Info() SessionInfo {
	if s == nil {
		return SessionInfo{}
	}
	return s.info
}

// End takes the session out of the table. It is idempotent, and does
// nothing on a nil session.
func (s *Session) End() {
	if s == nil {
		return
	}
	s.once.Do(func() {
		ss := &s.t.sessions
		ss.mu.Lock()
		delete(ss.live, s.id)
		ss.mu.Unlock()
		s.user.sessions.Add(-1)
	})
}

func (s *Session) snapshot() SessionSnapshot {
	return SessionSnapshot{
		ID: s.id, SessionInfo: s.info, Start: s.start,
		Up: s.up.Load(), Down: s.down.Load(), Flows: int(s.flows.Load()),
	}
}

// lookup returns the live session with id; nil for 0 or an ended one.
func (ss *sessions) lookup(id uint64) *Session {
	if id == 0 {
		return nil
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.live[id]
}

// Sessions returns the live sessions ordered by id.
func (t *Tracker) Sessions() []SessionSnapshot {
	ss := &t.sessions
	return byID(&ss.mu, ss.live, (*Session).snapshot, func(s SessionSnapshot) uint64 { return s.ID })
}

// Session returns the live session with id.
func (t *Tracker) Session(id uint64) (SessionSnapshot, bool) {
	if s := t.sessions.lookup(id); s != nil {
		return s.snapshot(), true
	}
	return SessionSnapshot{}, false
}
