package score

import (
	"sync"

	"switchyard/netx"
)

// Pools holds the one committed serving pool of each configured Score
// group on each network. It is bounded by the configuration: Get creates
// pools only for configured groups, and Reload drops the pools of groups
// that left it.
type Pools struct {
	clock Clock

	mu     sync.Mutex
	groups map[GroupID]struct{}
	pools  map[poolKey]*Pool
}

type poolKey struct {
	group GroupID
	net   netx.Network
}

// NewPools returns the pools of groups (their UUIDs); a nil clock is the
// wall clock.
func NewPools(clock Clock, groups []GroupID) *Pools {
	ps := &Pools{clock: clock, pools: map[poolKey]*Pool{}}
	ps.groups = groupSet(groups)
	return ps
}

func groupSet(groups []GroupID) map[GroupID]struct{} {
	m := make(map[GroupID]struct{}, len(groups))
	for _, g := range groups {
		m[g] = struct{}{}
	}
	return m
}

// Get returns group's pool on network, created uninitialized on first
// use; nil when group is not configured.
func (ps *Pools) Get(group GroupID, network netx.Network) *Pool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if _, ok := ps.groups[group]; !ok {
		return nil
	}
	k := poolKey{group, network}
	p := ps.pools[k]
	if p == nil {
		p = NewPool(ps.clock, group, network)
		ps.pools[k] = p
	}
	return p
}

// Len is the number of pools held.
func (ps *Pools) Len() int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return len(ps.pools)
}

// Reload commits a new configuration: the pools of groups no longer in
// it are dropped (their plans can no longer begin), every surviving
// pool resets its membership and capacity and keeps its decayed demand.
// A group keeps its pools while its UUID is unchanged.
func (ps *Pools) Reload(groups []GroupID) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.groups = groupSet(groups)
	for k, p := range ps.pools {
		p.Reload()
		if _, ok := ps.groups[k.group]; !ok {
			delete(ps.pools, k)
		}
	}
}

// peek returns group's pool on network without creating it.
func (ps *Pools) peek(group GroupID, network netx.Network) *Pool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.pools[poolKey{group, network}]
}
