package transport

import (
	"context"
	"slices"
	"sync/atomic"
	"time"
)

// xhH2 is one multiplexed connection of an xhttp client (HTTP/2 or
// HTTP/3), with the flows on it.
type xhH2 struct {
	x           *xhttpClient
	cc          xhCC
	raw         xhAddrs
	born        time.Time
	maxRequests int64         // the requests it serves; 0: no bound
	maxAge      time.Duration // how long it takes new flows; 0: no bound
	requests    atomic.Int64
	// answered: the server answered a flow's requests on c, so later
	// flows need not wait for their answer before they send.
	answered atomic.Bool
	closed   atomic.Bool

	// Guarded by x.mu.
	flows  int         // the flows on c now
	left   int64       // the flows c may take after these; below 0: no bound
	listed bool        // in x.conns: new flows may take it
	idle   bool        // listed without a flow: counted in x.idleN
	timer  *time.Timer // closes c once it has been without a flow xhttpIdle
}

// usable reports whether a new flow may start on c.
func (c *xhH2) usable() bool {
	return !c.closed.Load() && c.cc.Err() == nil && c.cc.Available() > 0 && c.left != 0 &&
		(c.maxRequests == 0 || c.requests.Load() < c.maxRequests) &&
		(c.maxAge == 0 || time.Since(c.born) < c.maxAge)
}

// close ends c with its streams (idempotent); no lock may be held.
func (c *xhH2) close() {
	if !c.closed.CompareAndSwap(false, true) {
		return
	}
	x := c.x
	x.mu.Lock()
	delete(x.live, c)
	x.unlistLocked(c)
	x.mu.Unlock()
	c.cc.Close()
}

// unlistLocked takes c out of x.conns: no new flow takes it, and it closes
// when its last flow ends. x.mu is held.
func (x *xhttpClient) unlistLocked(c *xhH2) {
	if !c.listed {
		return
	}
	c.listed = false
	if i := slices.Index(x.conns, c); i >= 0 {
		x.conns = slices.Delete(x.conns, i, i+1)
	}
	x.busyLocked(c)
}

// busyLocked ends c's wait for a flow. x.mu is held.
func (x *xhttpClient) busyLocked(c *xhH2) {
	if !c.idle {
		return
	}
	c.idle = false
	c.timer.Stop()
	for i := len(x.idle) - 1; i >= 0; i-- {
		if x.idle[i] == c {
			x.idle = slices.Delete(x.idle, i, i+1)
			break
		}
	}
	x.idleN.Store(int32(len(x.idle)))
}

// idleLocked starts c's wait for its next flow. x.mu is held.
func (x *xhttpClient) idleLocked(c *xhH2) {
	if c.idle {
		return
	}
	c.idle = true
	x.idle = append(x.idle, c)
	x.idleN.Store(int32(len(x.idle)))
	if c.timer == nil {
		c.timer = time.AfterFunc(xhttpIdle, func() {
			x.mu.Lock()
			idle := c.listed && c.flows == 0
			if idle {
				x.unlistLocked(c)
			}
			x.mu.Unlock()
			if idle {
				c.close()
			}
		})
		return
	}
	c.timer.Reset(xhttpIdle)
}

// newMuxConn opens one HTTP/2 or HTTP/3 connection under ctx.
func (x *xhttpClient) newMuxConn(ctx context.Context) (xhCC, xhAddrs, error) {
	if x.h3 != nil {
		c, err := x.newH3Conn(ctx)
		if err != nil {
			return nil, nil, err
		}
		return c, c, nil
	}
	cc, raw, err := x.newConn(ctx)
	if err != nil {
		return nil, nil, err
	}
	return cc, raw, nil
}

// connectH2 opens a new HTTP/2 (or HTTP/3) connection under ctx, carrying flows (0 or
// 1) from the start. A listed one is in x.conns for the flows after, and
// counts toward max_connections while it connects; an unlisted one (a
// speculative dial's) is its flow's alone until list.
func (x *xhttpClient) connectH2(ctx context.Context, flows int, listed bool) (*xhH2, error) {
	if listed {
		x.mu.Lock()
		x.pending++
		x.mu.Unlock()
	}
	cc, raw, err := x.newMuxConn(ctx)
	x.mu.Lock()
	if listed {
		x.pending--
	}
	if err != nil {
		x.mu.Unlock()
		return nil, err
	}
	if x.closed {
		x.mu.Unlock()
		cc.Close()
		return nil, ErrClosed
	}
	c := &xhH2{x: x, cc: cc, raw: raw, born: time.Now(), flows: flows, left: -1,
		maxRequests: drawInt(x.requestTimes), maxAge: time.Duration(drawInt(x.reusableSecs)) * time.Second}
	if n := drawInt(x.reuseTimes); n > 0 {
		c.left = n - 1
	}
	x.live[c] = struct{}{}
	if listed {
		x.listLocked(c)
	}
	x.mu.Unlock()
	onBroken(cc, c.close)
	if err := cc.Err(); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

// listLocked puts c in x.conns. x.mu is held.
func (x *xhttpClient) listLocked(c *xhH2) {
	if c.listed || c.closed.Load() {
		return
	}
	c.listed = true
	x.conns = append(x.conns, c)
	if c.flows == 0 {
		x.idleLocked(c)
	}
}

// take returns a connection a new flow starts on, counted as that flow's;
// nil when the flow is to connect afresh: no connection can take another
// flow, or max_connections has not been reached. It takes the one with the
// fewest flows, the newest among those (the least likely to have been let
// go by the server), and unlists the ones that may take no more.
func (x *xhttpClient) take() *xhH2 {
	var stale []*xhH2
	defer func() {
		for _, c := range stale {
			c.close()
		}
	}()
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.connections > 0 {
		// Bounded by max_connections: count only the ones that may
		// still take flows.
		for i := len(x.conns) - 1; i >= 0; i-- {
			if c := x.conns[i]; !c.usable() {
				x.unlistLocked(c)
				if c.flows == 0 {
					stale = append(stale, c)
				}
			}
		}
		if int64(len(x.conns)+x.pending) < x.connections {
			return nil
		}
	}
	// An idle connection has the fewest flows: the newest that may still
	// take one. Only when none is idle and a connection may carry more
	// than one flow are the busy ones looked at (by default none is).
	best := (*xhH2)(nil)
	for n := len(x.idle); n > 0 && best == nil; n = len(x.idle) {
		c := x.idle[n-1]
		if c.usable() {
			best = c
			break
		}
		x.unlistLocked(c)
		stale = append(stale, c)
	}
	if best == nil && x.concurrency != 1 {
		for i := len(x.conns) - 1; i >= 0; i-- {
			c := x.conns[i]
			if x.concurrency > 0 && int64(c.flows) >= x.concurrency {
				continue
			}
			if !c.usable() {
				x.unlistLocked(c)
				if c.flows == 0 {
					stale = append(stale, c)
				}
				continue
			}
			if best == nil || c.flows < best.flows {
				best = c
			}
		}
	}
	if best == nil {
		return nil
	}
	x.busyLocked(best)
	best.flows++
	if best.left > 0 {
		best.left--
	}
	return best
}

// release ends a flow's hold on c. keep false unlists c (its flow could
// not open on it: a silent or refusing server). A connection left without
// a flow waits xhttpIdle for the next, or closes: when unlisted, when it
// may take no more flows, or when xhIdleMax connections wait already.
func (x *xhttpClient) release(c *xhH2, keep bool) {
	x.mu.Lock()
	c.flows--
	if !keep {
		x.unlistLocked(c)
	}
	end := false
	if c.flows == 0 {
		end = !c.listed || x.closed || !c.usable() || int(x.idleN.Load()) >= xhIdleMax
		if end {
			x.unlistLocked(c)
		} else {
			x.idleLocked(c)
		}
	}
	x.mu.Unlock()
	if end {
		c.close()
	}
}
