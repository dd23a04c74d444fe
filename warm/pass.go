package warm

import (
	"slices"
	"time"

	"switchyard/health"
	"switchyard/outbound"
)

// What an attempt is for, in its log line.
const (
	forPreconnect = "preconnect"
	forSelector   = "selector pin"
	forUDP        = "udp warm set"
)

// pass sets every runtime's owner bits from the running configuration,
// cools the runtimes that lost their last one, and starts an attempt for
// each owned runtime (and, on the first pass, for the preconnect's).
func (m *Manager) pass(first bool) {
	m.mu.Lock()
	src, cfg := m.src, m.cfg
	byID := make(map[health.NodeID]*Runtime, len(m.runtimes))
	for _, r := range m.runtimes {
		byID[r.node.ID] = r
	}
	m.mu.Unlock()
	if src == nil {
		return
	}
	want := make(map[*Runtime]Owner)
	var order []*Runtime // owned runtimes in the order they were found
	own := func(r *Runtime, bit Owner) {
		if want[r] == 0 {
			order = append(order, r)
		}
		want[r] |= bit
	}
	if cfg.SelectorPin {
		for _, r := range selectorSet(src.SelectorChoices(), byID) {
			own(r, OwnSelector)
		}
	}
	if cfg.UDPWarmSet > 0 {
		for _, r := range udpSet(src.UDPRanked(), byID, cfg.UDPWarmSet) {
			own(r, OwnUDP)
		}
	}
	for _, r := range byID {
		if r.cooled.Load() {
			continue
		}
		if old := r.setOwners(want[r]); old != 0 && want[r] == 0 {
			r.node.Out.Cool()
			m.log.Debug("warm: released", "node", r.node.Name, "owners", old.String())
		}
	}
	for _, r := range order {
		what := forUDP
		if want[r]&OwnSelector != 0 {
			what = forSelector
		}
		m.attempt(src, r, true, what)
	}
	if first && cfg.Preconnect > 0 {
		for _, r := range preconnectSet(src.GroupPicks(), src.Nodes(), byID, cfg.Preconnect) {
			if want[r] == 0 { // a pinned node's first connection is its seed
				m.attempt(src, r, false, forPreconnect)
			}
		}
	}
}

// selectorSet is the runtimes of the Selectors' choices that keep
// something warm, once each.
func selectorSet(choices []health.NodeID, byID map[health.NodeID]*Runtime) []*Runtime {
	var out []*Runtime
	for _, id := range choices {
		r := byID[id]
		if r == nil || r.node.Out.Warmth().Kind == outbound.WarmNone || slices.Contains(out, r) {
			continue
		}
		out = append(out, r)
	}
	return out
}

// udpSet is the UDP warm set for N: of each ranking (a group and an
// address family), its first min(N, UDPDepth) leaves with reusable UDP
// state; deduplicated by node, each at its best rank; re-ranked by that
// rank (ties in the order first met) and capped at UDPCapFactor × N.
func udpSet(rankings [][]health.NodeID, byID map[health.NodeID]*Runtime, n int) []*Runtime {
	depth := min(n, UDPDepth)
	rank := make(map[*Runtime]int)
	var out []*Runtime
	for _, ranking := range rankings {
		k := 0
		for _, id := range ranking {
			if k == depth {
				break
			}
			r := byID[id]
			if r == nil || !reusableUDP(r) {
				continue
			}
			if best, ok := rank[r]; !ok {
				rank[r] = k
				out = append(out, r)
			} else if k < best {
				rank[r] = k
			}
			k++
		}
	}
	slices.SortStableFunc(out, func(a, b *Runtime) int { return rank[a] - rank[b] })
	if limit := UDPCapFactor * n; len(out) > limit {
		out = out[:limit]
	}
	return out
}

// reusableUDP: the node carries UDP on a session its flows share. A bare
// TCP pool is no UDP state: each association opens its own stream.
func reusableUDP(r *Runtime) bool {
	return r.node.UDP && r.node.Out.Warmth().Kind == outbound.WarmSession
}

// preconnectSet is the startup preconnect's nodes: the groups' current
// picks first, then every node in configuration order; bare-TCP-poolable
// ones only, once each, at most n.
func preconnectSet(picks []health.NodeID, nodes []Node, byID map[health.NodeID]*Runtime, n int) []*Runtime {
	var out []*Runtime
	add := func(id health.NodeID) {
		r := byID[id]
		if len(out) < n && r != nil && r.node.Out.Warmth().Kind == outbound.WarmPool && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	for _, id := range picks {
		add(id)
	}
	for _, nd := range nodes {
		add(nd.ID)
	}
	return out
}

// attempt warms r on a goroutine of the manager's, under one of the
// MaxAttempts permits and an establishment of src's generation, unless an
// attempt for r is under way already. keep: retain (a pin), else seed.
func (m *Manager) attempt(src Source, r *Runtime, keep bool, what string) {
	if !r.busy.CompareAndSwap(false, true) {
		return
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		r.busy.Store(false)
		return
	}
	m.wg.Add(1)
	m.inflight.Add(1)
	m.mu.Unlock()
	go func() {
		defer m.wg.Done()
		defer m.inflight.Add(-1)
		defer r.busy.Store(false)
		select {
		case m.sem <- struct{}{}:
		case <-m.ctx.Done():
			return
		}
		defer func() { <-m.sem }()
		ctx, end := src.Begin(m.ctx)
		start := time.Now()
		opened, err := r.node.Out.Warm(ctx, keep)
		end()
		took := time.Since(start)
		if r.cooled.Load() || keep && r.Owners() == 0 {
			// Released while it ran: what it kept is nobody's.
			r.node.Out.Cool()
		}
		switch {
		case err != nil && m.ctx.Err() != nil:
			// Closing: neither an outcome nor worth a line.
		case err != nil:
			r.noteAttempt(m.clock.Now(), err)
			m.log.Debug("warm attempt", "node", r.node.Name, "what", what, "outcome", "failed", "error", err, "duration", took)
		case opened:
			r.noteAttempt(m.clock.Now(), nil)
			m.log.Debug("warm attempt", "node", r.node.Name, "what", what, "outcome", "opened", "duration", took)
		}
	}()
}
