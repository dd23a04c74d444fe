package score

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"switchyard/health"
	"switchyard/netx"
)

// engineState is the Engine's state behind the contract's Engine type.
type engineState struct {
	scorer *Scorer
	pools  *Pools
	budget *Budget
	cmp    *compareStore
	hist   *history

	cfgMu    sync.Mutex // serializes Configure
	cfg      atomic.Pointer[engineConfig]
	counters sync.Map // GroupID → *groupCounters, kept while the group is configured
	scratch  sync.Pool
}

// engineConfig is one published configuration: read lock-free by every
// rank, replaced whole by Configure.
type engineConfig struct {
	groups map[GroupID]*groupState
	byNode map[health.NodeID][]GroupID
	order  []GroupID
	at     int64 // the Configure's time: hints before it are fenced
}

// groupState is one configured group at one configuration.
type groupState struct {
	id      GroupID
	members int
	// leaves holds each leaf's per-network state: its unfinished work and
	// its latest carrier-pressure hint.
	leaves map[health.NodeID]*leafState
	c      *groupCounters
	// hinted is the latest hint time of any leaf per network: a rank
	// skips the per-member hint reads while it is not fresh.
	hinted [2]atomic.Int64
}

// leafState is one leaf's per-network state in one group at one
// configuration (a reload starts it afresh: the fence of prior hints).
type leafState struct {
	// unfinished counts the leaf's begun, unsettled non-trial flows: the
	// dispatch walk's unfinished work.
	unfinished [2]atomic.Int32
	// hint is the event time (unix ns) of the latest carrier-pressure
	// hint admitted for the leaf's runtime; 0: none.
	hint [2]atomic.Int64
	// inc is the leaf's incarnation at this configuration (the budget's
	// member record, committed by the same Configure).
	inc uint64
}

// groupCounters are a group's counters, kept across reloads.
type groupCounters struct {
	nets [2]netCounters
}

// netCounters are one (group, network)'s reason and stats counters.
type netCounters struct {
	reasons                                   [NumReasons]atomic.Int64
	ordinarySwitch, switchFlap                atomic.Int64
	deadFiltered, failStreakExcluded          atomic.Int64
	exploreBackedOff, budgetBlocked, inFlight atomic.Int64
	trialElapsed, trialSetup                  atomic.Int64  // ns of observed trial work
	provisional, usable, validation           atomic.Int64  // verification of authorized ranks (verified)
	last                                      atomic.Uint32 // the latest final reason counted
	winnersMu                                 sync.Mutex
	winners                                   [4]health.NodeID // the four recent Apply winners, newest first
	nWinners                                  int
}

// recentWinner reports whether node is one of the four recent Apply
// winners.
func (n *netCounters) recentWinner(node health.NodeID) bool {
	n.winnersMu.Lock()
	defer n.winnersMu.Unlock()
	return slices.Contains(n.winners[:n.nWinners], node)
}

// verified counts one authorized multi-candidate rank's verification:
// its ordinary selection provisional (not qualified in the rank's scope)
// or observed usable, as Explain reads them, and whether the rank
// dispatched a validation (a funded trial).
func (n *netCounters) verified(sel *rankView, hasTarget, trial bool) {
	if !qualifiedIn(sel, hasTarget) {
		n.provisional.Add(1)
	}
	if usableIn(sel, hasTarget) {
		n.usable.Add(1)
	}
	if trial {
		n.validation.Add(1)
	}
}

func (n *netCounters) applied(node health.NodeID) {
	n.winnersMu.Lock()
	defer n.winnersMu.Unlock()
	if n.nWinners > 0 && n.winners[0] == node {
		return
	}
	if i := slices.Index(n.winners[:n.nWinners], node); i >= 0 {
		copy(n.winners[1:i+1], n.winners[:i])
	} else {
		copy(n.winners[1:], n.winners[:len(n.winners)-1])
		n.nWinners = min(n.nWinners+1, len(n.winners))
	}
	n.winners[0] = node
}

func netIndex(n netx.Network) int {
	if n == netx.UDP {
		return 1
	}
	return 0
}

// NewEngine returns an Engine with no configured group; a nil clock is
// the wall clock. Configure gives it its groups.
func NewEngine(clock Clock) *Engine {
	if clock == nil {
		clock = wallClock{}
	}
	e := &Engine{clock: clock}
	e.scorer = New(clock, nil)
	e.pools = NewPools(clock, nil)
	e.budget = NewBudget(clock, nil)
	e.cmp = newCompareStore()
	e.hist = newHistory()
	e.cfg.Store(&engineConfig{groups: map[GroupID]*groupState{}, byNode: map[health.NodeID][]GroupID{}})
	e.scratch.New = func() any { return new(rankScratch) }
	return e
}

// Configure commits the configured Score groups at at: the first call
// gives the Engine its groups, every later one is a reload. Scorer,
// pools and budget reload with the new (group, node, incarnation) set
// (see their documentation); a group absent from groups is dropped with
// its pools, scopes and counters; the comparison store is fenced
// (cleared). Counters of a retained group survive.
func (e *Engine) Configure(at time.Time, groups []GroupSpec) {
	e.cfgMu.Lock()
	defer e.cfgMu.Unlock()
	cfg := &engineConfig{groups: make(map[GroupID]*groupState, len(groups)), byNode: map[health.NodeID][]GroupID{}, at: at.UnixNano()}
	var members []Member
	var ids []GroupID
	for _, g := range groups {
		if _, dup := cfg.groups[g.ID]; dup {
			continue
		}
		c, _ := e.counters.LoadOrStore(g.ID, &groupCounters{})
		gs := &groupState{id: g.ID, members: g.Members, leaves: make(map[health.NodeID]*leafState, len(g.Leaves)), c: c.(*groupCounters)}
		for _, l := range g.Leaves {
			if _, dup := gs.leaves[l.Node]; dup {
				continue
			}
			gs.leaves[l.Node] = &leafState{inc: l.Incarnation}
			members = append(members, Member{Group: g.ID, Node: l.Node, Incarnation: l.Incarnation})
			cfg.byNode[l.Node] = append(cfg.byNode[l.Node], g.ID)
		}
		cfg.groups[g.ID] = gs
		cfg.order = append(cfg.order, g.ID)
		ids = append(ids, g.ID)
	}
	e.counters.Range(func(k, _ any) bool {
		if _, ok := cfg.groups[k.(GroupID)]; !ok {
			e.counters.Delete(k)
		}
		return true
	})
	e.scorer.Reload(at, members)
	e.pools.Reload(ids)
	e.budget.reloadSized(members, sizes(groups))
	e.cmp.reset()
	e.cfg.Store(cfg)
}

// sizes is every group's configured member count n (the budget's n), a
// group of subgroups having fewer members than leaves.
func sizes(groups []GroupSpec) map[GroupID]int {
	m := make(map[GroupID]int, len(groups))
	for _, g := range groups {
		m[g.ID] = g.Members
	}
	return m
}

// Probe records a configured health probe of node on network, started at
// started (rtt when ok), for every Score group holding node: the
// global aggregate's probe slot, and — for a successful probe with a
// representable cadence (interval; negative when unknown) — the node's
// configured-probe comparison cohort.
func (e *Engine) Probe(network netx.Network, node health.NodeID, started time.Time, rtt time.Duration, ok bool, interval time.Duration) {
	cfg := e.cfg.Load()
	for _, g := range cfg.byNode[node] {
		e.scorer.RecordProbe(g, network, node, started, rtt, ok)
		w := probeWidth(interval)
		if !ok || w == 0 || rtt <= 0 {
			continue
		}
		k := cmpKey{group: g, node: node, net: network, fam: noFamily, cadence: interval}
		e.cmp.add(k, w, cmpResponse, started.UnixNano(), float64(rtt)/float64(time.Millisecond), e.scorer.NewEpisodeID(), e.admits(cfg.groups[g], network, node))
	}
}

// admits is comparison-cell admission: serving membership, with the
// exceptions for the four recent Apply winners and initial collection
// (a pool not yet initialized).
func (e *Engine) admits(g *groupState, network netx.Network, node health.NodeID) bool {
	if g == nil {
		return false
	}
	p := e.pools.peek(g.id, network)
	if p == nil {
		return true
	}
	if init, member := p.admits(node); !init || member {
		return true
	}
	return g.c.nets[netIndex(network)].recentWinner(node)
}

// NodeDown records an authoritative health exclusion of node at at:
// every pool holding it replaces it at its next Apply when an eligible
// replacement exists.
func (e *Engine) NodeDown(node health.NodeID, at time.Time) {
	cfg := e.cfg.Load()
	for _, g := range cfg.byNode[node] {
		for _, n := range [...]netx.Network{netx.TCP, netx.UDP} {
			if p := e.pools.peek(g, n); p != nil {
				p.Excluded(node)
			}
		}
	}
}

// NewEpisode returns a fresh episode for one fanned-out failure.
func (e *Engine) NewEpisode() EpisodeID { return e.scorer.NewEpisode() }
