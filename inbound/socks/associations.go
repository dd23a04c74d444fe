package socks

import (
	"log/slog"
	"net"
	"sync"
	"time"
)

// refusalLogInterval is how often, at most, refused associations are
// logged: one line per interval tells the operator that the cap is hit and
// how often, without letting a client flood the log.
const refusalLogInterval = 10 * time.Second

// associations is a server's live UDP associations: their cap, the set
// Server.Close ends, and the watcher of their control connections.
type associations struct {
	max int // 0: no cap

	// mu guards the fields below; it is never held across I/O.
	mu       sync.Mutex
	n        int // admitted, from acquire to release
	live     map[*association]struct{}
	closed   bool
	watcher  *hangups // made at the first watch; nil while none
	noWatch  bool     // making the watcher failed: associations wait on their control connections
	refusals int      // refused since the last line logged
	logged   time.Time
}

func newAssociations(max int) *associations {
	return &associations{max: max, live: make(map[*association]struct{})}
}

// acquire admits one more association, unless the cap is reached.
func (s *associations) acquire() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.max > 0 && s.n >= s.max {
		s.refusals++
		return false
	}
	s.n++
	return true
}

func (s *associations) release() {
	s.mu.Lock()
	s.n--
	s.mu.Unlock()
}

// refused logs refused associations at warn level, at most once per
// refusalLogInterval, with how many were refused since the last line.
func (s *associations) refused(log *slog.Logger) {
	s.mu.Lock()
	now := time.Now()
	if now.Sub(s.logged) < refusalLogInterval {
		s.mu.Unlock()
		return
	}
	n := s.refusals
	s.refusals, s.logged = 0, now
	s.mu.Unlock()
	log.Warn("socks udp association refused: too many associations", "max_udp_associations", s.max, "refused", n)
}

// add registers a live association; false once the server is closing.
func (s *associations) add(a *association) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.live[a] = struct{}{}
	return true
}

func (s *associations) remove(a *association) {
	s.mu.Lock()
	delete(s.live, a)
	s.mu.Unlock()
}

// watch calls end once the control connection c hangs up, and returns
// what stops the watch; nil when c cannot be watched without a goroutine of
// its own.
func (s *associations) watch(c net.Conn, end func()) func() {
	s.mu.Lock()
	if s.watcher == nil && !s.noWatch && !s.closed {
		w, err := newHangups()
		if err != nil {
			s.noWatch = true
		} else {
			s.watcher = w
		}
	}
	w := s.watcher
	s.mu.Unlock()
	if w == nil {
		return nil
	}
	return w.watch(c, end)
}

// close ends every live association and refuses new ones. The watcher is
// closed by closeWatcher, once the associations' handlers are done.
func (s *associations) close() {
	s.mu.Lock()
	s.closed = true
	live := make([]*association, 0, len(s.live))
	for a := range s.live {
		live = append(live, a)
	}
	s.mu.Unlock()
	for _, a := range live {
		a.hangUp()
	}
}

func (s *associations) closeWatcher() {
	s.mu.Lock()
	w := s.watcher
	s.watcher = nil
	s.mu.Unlock()
	if w != nil {
		w.close()
	}
}
