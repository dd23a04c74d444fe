package slot

import "time"

// Phase is what a slot is doing.
type Phase uint8

const (
	Idle         Phase = iota // nothing in service, nothing under way, free to establish
	Establishing              // an establishment is in flight
	Up                        // a resource is in service
	Backoff                   // nothing in service; waiting after a failure
	Draining                  // Drain was called: no new user
	Closed                    // Close was called
)

var phaseNames = [...]string{"idle", "establishing", "up", "backoff", "draining", "closed"}

func (p Phase) String() string {
	if int(p) < len(phaseNames) {
		return phaseNames[p]
	}
	return "unknown"
}

// State is a reading of a slot for the API and metrics.
type State struct {
	Phase Phase
	// Gen is the generation of the resource in service (0: none); the
	// first resource a slot establishes is generation 1.
	Gen uint64
	// UpSince is when the resource in service came up.
	UpSince time.Time
	// Holds are the users holding the resource in service.
	Holds int64
	// Retired are the resources out of service still carrying users.
	Retired int
	// Detached are the resources speculative dials established for
	// themselves (AcquireDetached), neither adopted nor released yet.
	Detached int
	// Failures are the consecutive failures the backoff counts; RetryAt
	// is when the next establishment may start (zero: at once).
	Failures int
	RetryAt  time.Time
	// LastErr is the last failed establishment's error, at LastErrAt.
	LastErr   error
	LastErrAt time.Time
}

// snapshot is what publish stores: everything but the holds, read live.
type snapshot[T Resource] struct {
	st  State
	cur *Res[T]
}

// publish stores the slot's state for State; s.mu is held.
func (s *Slot[T]) publish() {
	st := State{
		Failures:  s.failures,
		RetryAt:   s.retryAt,
		LastErr:   s.lastErr,
		LastErrAt: s.lastAt,
	}
	switch {
	case s.closed:
		st.Phase = Closed
	case s.draining:
		st.Phase = Draining
	case s.cur != nil:
		st.Phase = Up
	case s.pending != nil:
		st.Phase = Establishing
	}
	if s.cur != nil {
		st.Gen, st.UpSince = s.cur.Gen, s.cur.upAt
	}
	for r := range s.live {
		switch {
		case r == s.cur:
		case r.detached:
			st.Detached++
		default:
			st.Retired++
		}
	}
	s.snap.Store(&snapshot[T]{st: st, cur: s.cur})
}

// State reads the slot's published state; it takes no lock.
func (s *Slot[T]) State() State {
	sn := s.snap.Load()
	st := sn.st
	if sn.cur != nil {
		st.Holds = sn.cur.holds.Load()
	}
	if st.Phase == Idle && s.now().Before(st.RetryAt) {
		st.Phase = Backoff
	}
	return st
}
