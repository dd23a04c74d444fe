package connpool

import (
	"net"
	"time"
)

// The learning's bounds (the package documentation explains them).
const (
	// DefaultCap is the age at which a sentinel still open ends the
	// learning: the bound becomes DefaultCap − 1 s.
	DefaultCap = 120 * time.Second
	// MinIdle is the floor of a learned bound (or Config.Idle when that is
	// smaller). A server found to close an idle connection sooner than it
	// — by a sentinel, not by one early death, which may as well be a
	// reset — leaves nothing worth keeping: the pool stops replacing.
	MinIdle = 500 * time.Millisecond

	// DefaultRelearn is how long a learned bound stands before a kept pool
	// checks it again with one more sentinel: a server's policy may have
	// changed, or a sentinel met a restart rather than the policy.
	DefaultRelearn = 30 * time.Minute

	minLook = 250 * time.Millisecond
	maxLook = 2 * time.Second
)

// learned is the bound taken from a connection the server closed, last
// seen open at age alive: a second short of it, or half of it when it is
// under 2 s, so that a flow's request still reaches the server in time.
func learned(alive time.Duration) time.Duration {
	return alive - min(time.Second, alive/2)
}

// lookEvery is the interval between two looks into a pooled connection of
// age age: finer while it is young, where a bound learned from it is
// small and an error weighs more.
func lookEvery(age time.Duration) time.Duration {
	return min(max(age/16, minLook), maxLook)
}

// Bound is the pool's idle bound now; it takes no lock.
func (p *Pool) Bound() time.Duration { return time.Duration(p.bound.Load()) }

// died records that e, a pooled connection, was found closed by its
// server, and closes a sentinel that was out.
func (p *Pool) died(e entry) {
	p.mu.Lock()
	s := p.diedLocked(e)
	p.mu.Unlock()
	if s != nil {
		s.c.Close()
	}
}

// floor is the least bound: MinIdle, or Config.Idle when smaller.
func (p *Pool) floor() time.Duration { return min(MinIdle, p.cfg.Idle) }

// diedLocked lowers the bound to what e's death shows when that is below
// it (at least the floor), and starts learning again; it returns the
// sentinel it dropped, for the caller to close outside the lock.
func (p *Pool) diedLocked(e entry) *entry {
	b := max(learned(e.alive.Sub(e.at)), p.floor())
	if b >= p.Bound() {
		return nil
	}
	p.bound.Store(int64(b))
	p.learning.Store(true)
	p.futile = false
	return p.dropSentinelLocked()
}

// settleLocked ends the learning, at now, at what a sentinel last seen
// open at age alive shows.
func (p *Pool) settleLocked(now time.Time, alive time.Duration) {
	p.settled = now
	b := learned(alive)
	p.futile = b < p.floor()
	p.bound.Store(int64(max(b, p.floor())))
	p.learning.Store(false)
}

func (p *Pool) dropSentinelLocked() *entry {
	s := p.sentinel
	p.sentinel = nil
	p.hasSentinel.Store(false)
	return s
}

// keepSentinelLocked makes e, a connection that reached the bound at now,
// the sentinel when the pool is kept warm, has none, and is learning (or
// its bound is older than Relearn: then it learns again).
func (p *Pool) keepSentinelLocked(e entry, now time.Time) bool {
	if p.closed || !p.cfg.Refresh || p.level <= 0 || p.sentinel != nil {
		return false
	}
	if !p.learning.Load() {
		if now.Sub(p.settled) < p.cfg.Relearn {
			return false
		}
		p.learning.Store(true)
	}
	p.sentinel = &e
	p.hasSentinel.Store(true)
	return true
}

// lookDue looks into the pooled connections and the sentinel whose look
// is due at now, outside the lock: a closed one is removed (its
// replacement owed) and teaches the bound; the sentinel still open at Cap
// ends the learning.
func (p *Pool) lookDue(now time.Time) {
	p.mu.Lock()
	var due []net.Conn
	for _, e := range p.idle {
		if !now.Before(e.next) {
			due = append(due, e.c)
		}
	}
	if s := p.sentinel; s != nil && !now.Before(s.next) {
		due = append(due, s.c)
	}
	p.mu.Unlock()
	if len(due) == 0 {
		return
	}
	found := make(map[net.Conn]verdict, len(due))
	for _, c := range due {
		found[c] = look(c)
	}
	var drop []net.Conn
	p.mu.Lock()
	kept := p.idle[:0]
	for _, e := range p.idle {
		v, ok := found[e.c]
		switch {
		case !ok:
		case v == fine:
			e.alive, e.next = now, now.Add(lookEvery(now.Sub(e.at)))
		default:
			drop = append(drop, e.c)
			p.dead.Add(1)
			p.owed++
			if v == closed {
				if s := p.diedLocked(e); s != nil {
					drop = append(drop, s.c)
				}
			}
			continue
		}
		kept = append(kept, e)
	}
	clear(p.idle[len(kept):])
	p.idle = kept
	p.nIdle.Store(int64(len(p.idle)))
	if s := p.sentinel; s != nil {
		if v, ok := found[s.c]; ok {
			age := now.Sub(s.at)
			switch {
			case v == closed:
				p.settleLocked(now, s.alive.Sub(s.at))
			case v == spoke: // it taught nothing: the next one learns
			case age >= p.cfg.Cap:
				p.settleLocked(now, p.cfg.Cap)
				p.expired.Add(1)
			default:
				s.alive, s.next = now, now.Add(lookEvery(age))
			}
			if v != fine || age >= p.cfg.Cap {
				drop = append(drop, s.c)
				p.dropSentinelLocked()
			}
		}
	}
	p.mu.Unlock()
	for _, c := range drop {
		c.Close()
	}
}
