package health

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// urlKey names a per-group check_url state: by member tag, not NodeID (a
// member may be a sub-group, probed through its current leaf).
type urlKey struct{ member, url string }

// urlEntry is one check_url state: TCP only, one state (no family), the
// same threshold, cooldown and two-success recovery as a node's, and the
// grace of the leaf it is probed through.
type urlEntry struct {
	key  urlKey
	busy atomic.Bool // a probe is in flight
	snap atomic.Pointer[cellView]

	mu   sync.Mutex // guards leaf and c
	leaf NodeID     // the member's current leaf, as the last URLTargets said
	c    cell
}

var initialURLView = &cellView{alive: true}

func (u *urlEntry) leafID() NodeID {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.leaf
}

func (u *urlEntry) parked() bool {
	v := u.snap.Load()
	return !v.alive
}

func (u *urlEntry) due(now time.Time) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.c.due(now)
}

// refreshURLs replaces the check_url set by what URLTargets returns now:
// existing states are kept (with their current leaf), new ones start
// alive, states no longer returned are dropped. It returns the set.
func (e *Engine) refreshURLs() map[urlKey]*urlEntry {
	if e.targets == nil {
		return *e.urls.Load()
	}
	targets := e.targets()
	e.urlMu.Lock()
	defer e.urlMu.Unlock()
	old := *e.urls.Load()
	next := make(map[urlKey]*urlEntry, len(targets))
	for _, t := range targets {
		k := urlKey{t.Member, t.URL}
		if next[k] != nil {
			continue // one state per (member, url); the first leaf is probed
		}
		u := old[k]
		if u == nil {
			u = &urlEntry{key: k, c: newCell()}
			u.snap.Store(initialURLView)
		}
		u.mu.Lock()
		u.leaf = t.Node
		u.mu.Unlock()
		next[k] = u
	}
	changed := len(next) != len(old)
	for k := range next {
		if old[k] == nil {
			changed = true
		}
	}
	e.urls.Store(&next)
	if changed {
		e.epoch.Add(1)
	}
	return next
}

// probeURL measures check_url state u through its leaf once and records
// the outcome under (member, url).
func (e *Engine) probeURL(ctx context.Context, u *urlEntry, forced bool) {
	n := e.node(u.leafID())
	if n == nil {
		return
	}
	m := n.meta.Load()
	if m.prober == nil {
		return
	}
	pctx, cancel := e.withTimeout(ctx, e.timeout)
	res, err := m.prober.TCP(pctx, u.key.url, e.method)
	cancel()
	if ctx.Err() != nil {
		return
	}
	e.recordURL(u, n, res, err, forced)
}

// recordURL applies one outcome of u probed through leaf; a failure in the
// leaf's grace does not count toward death.
func (e *Engine) recordURL(u *urlEntry, leaf *node, res Result, err error, forced bool) {
	u.mu.Lock()
	now := e.clock.Now()
	what := unchanged
	if err != nil {
		counts := leaf.counts(now, forced)
		if u.c.probeFail(now, counts) {
			u.c.die(now)
			what = died
		}
	} else {
		what = u.c.probeOK(now, rtt(res))
	}
	if v := (cellView{observed: u.c.observed, alive: u.c.alive, avg: u.c.avg, hasAvg: u.c.hasAvg}); v != *u.snap.Load() {
		p := new(cellView)
		*p = v
		u.snap.Store(p)
		e.epoch.Add(1)
	}
	u.mu.Unlock()
	switch what {
	case died:
		e.log.Info(fmt.Sprintf("check_url %s of %s dead after %s", u.key.url, u.key.member, probeCause))
	case revived:
		e.log.Info(fmt.Sprintf("check_url %s of %s alive again", u.key.url, u.key.member))
	}
	if what != unchanged && e.onChange != nil {
		e.onChange(leaf.id)
	}
}

// URLAlive reports whether the check_url state (member, url) is alive; a
// state not probed yet is.
func (e *Engine) URLAlive(member, url string) bool {
	u := (*e.urls.Load())[urlKey{member, url}]
	return u == nil || u.snap.Load().alive
}

// URLLatency returns the halving moving average of the check_url state
// (member, url); ok is false when it has no sample.
func (e *Engine) URLLatency(member, url string) (avg time.Duration, ok bool) {
	u := (*e.urls.Load())[urlKey{member, url}]
	if u == nil {
		return 0, false
	}
	v := u.snap.Load()
	return v.avg, v.hasAvg
}

// URLState returns the introspected check_url state (member, url) and the
// leaf it is probed through; ok is false for a state not in the set.
func (e *Engine) URLState(member, url string) (s DomainState, leaf NodeID, ok bool) {
	u := (*e.urls.Load())[urlKey{member, url}]
	if u == nil {
		return DomainState{}, NodeID{}, false
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.c.state(0), u.leaf, true
}
