package supervisor

import (
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"

	"switchyard/group"
	"switchyard/group/score"
	"switchyard/health"
	"switchyard/netx"
	"switchyard/outbound"
	"switchyard/plane"
	"switchyard/spec"
)

// groupEnv is what the groups of a generation are built with: the health
// they read and the supervisor's callbacks. The zero value reads every node
// as alive and unmeasured and calls back nothing (Check, and tests that
// build a plan alone).
type groupEnv struct {
	health         group.Health
	log            *slog.Logger
	onInterrupt    func(group, member string, network netx.Network) int
	onPersist      func(group string, network netx.Network, member string)
	onConnectivity func(group string, d health.Domain, f netx.Family, alive bool)
	onSwitch       func(tag string, network netx.Network, reason group.SwitchReason)
	score          *score.Engine // the process's; nil: the manager makes its own
}

// nodeIdentities gives every outbound tag of s its node identity: the one
// it had in cur while the tag stays, a fresh one for a new tag. A tag
// removed and added back is a new node.
func nodeIdentities(cur *state, s *spec.Spec) map[string]health.NodeID {
	ids := make(map[string]health.NodeID, len(s.Outbounds))
	for _, o := range s.Outbounds {
		if cur != nil {
			if id, ok := cur.nodeIDs[o.Tag]; ok {
				ids[o.Tag] = id
				continue
			}
		}
		ids[o.Tag] = newNodeID()
	}
	return ids
}

func newNodeID() health.NodeID {
	var id health.NodeID
	rand.Read(id[:])
	id[6] = id[6]&0x0f | 0x40 // version 4
	id[8] = id[8]&0x3f | 0x80 // RFC 4122 variant
	return id
}

// buildGroups builds the generation's group manager over the outbounds and
// balancers of next. Group identities carry over from cur by tag.
func buildGroups(cur *state, next *state, p *thePlan, s *spec.Spec, env *groupEnv) (*group.Manager, []string, error) {
	if len(s.Groups) == 0 {
		return nil, nil, nil
	}
	leaves := make(map[string]group.Leaf, len(next.outbounds))
	for _, o := range s.Outbounds {
		r := next.outbounds[o.Tag]
		leaves[o.Tag] = group.Leaf{
			Tag:    o.Tag,
			Node:   next.nodeIDs[o.Tag],
			Target: r.target,
			UDP:    outbound.CarriesUDP(r.target.Outbound()),
			Block:  o.Type == "block",
			// The health engine's incarnation of the node (healthNodes).
			Incarnation: uint64(r.target.ID().Version),
		}
	}
	balancers := make(map[string]*plane.Target, len(next.balancers))
	for tag, b := range next.balancers {
		balancers[tag] = b.target
	}
	var ids map[string]group.Identity
	if cur != nil && cur.groups != nil {
		ids = make(map[string]group.Identity)
		for _, g := range cur.groups.Groups() {
			ids[g.Tag] = g.Identity
		}
	}
	versions := make(map[string]uint32, len(p.groups))
	for _, st := range p.groups {
		versions[st.spec.Tag] = st.version
	}
	o := group.Options{Versions: versions}
	if env != nil {
		o.Health, o.Log = env.health, env.log
		o.OnInterrupt, o.OnPersist, o.OnConnectivity = env.onInterrupt, env.onPersist, env.onConnectivity
		o.OnSwitch = env.onSwitch
		o.Score = env.score
	}
	m, warnings, err := group.New(s.Groups, ids, leaves, balancers, o)
	if err != nil {
		return nil, nil, err
	}
	return m, warnings, nil
}

// ErrNoGroups is the answer to a group write when no group is configured.
var ErrNoGroups = errors.New("no group is configured")

// Groups is the running group manager (nil without groups), for readers:
// its introspection reads the manager's own published state.
func (sv *Supervisor) Groups() *group.Manager { return sv.groups.Load() }

// SelectGroup makes member the choice of the selector group on networks
// (both when none) and returns how many flows through the old choice were
// interrupted, once they are closed. It serializes with publication: a write
// lands on the manager published before a reload, whose choice the reload
// carries over, or on the one published after it, never on a replaced one.
func (sv *Supervisor) SelectGroup(tag, member string, networks ...netx.Network) (int, error) {
	for {
		sv.publishMu.Lock()
		m := sv.groups.Load()
		sv.publishMu.Unlock()
		if m == nil {
			return 0, fmt.Errorf("group %q: %w", tag, ErrNoGroups)
		}
		n, err := m.Select(tag, member, networks...)
		if errors.Is(err, group.ErrReplaced) {
			continue
		}
		return n, err
	}
}

// groupEnv is what the supervisor's groups are built with.
func (sv *Supervisor) groupEnv(eng *health.Engine) *groupEnv {
	env := &groupEnv{health: eng, log: sv.log, onConnectivity: sv.opts.GroupConnectivity, onSwitch: sv.onSwitchWarm(), score: sv.score}
	env.onInterrupt = func(group, member string, network netx.Network) int {
		n := interruptFlows(sv.tracker, group, member, network)
		sv.log.Info("flows through the old choice interrupted", "group", group, "member", member, "network", network.String(), "flows", n)
		return n
	}
	if st := sv.opts.Store; st != nil {
		env.onPersist = func(group string, network netx.Network, member string) {
			st.SetSelectorChoice(group, network.String(), member)
		}
	}
	return env
}

// restoreChoices sets the selector choices the store kept, at start.
func (sv *Supervisor) restoreChoices(m *group.Manager) {
	st := sv.opts.Store
	if m == nil || st == nil {
		return
	}
	for _, g := range m.Groups() {
		if g.Policy != "selector" {
			continue
		}
		for _, n := range [...]netx.Network{netx.TCP, netx.UDP} {
			if member, ok := st.SelectorChoice(g.Tag, n.String()); ok {
				if m.Restore(g.Tag, n, member) {
					sv.log.Debug("selector choice restored", "group", g.Tag, "network", n.String(), "member", member)
				}
			}
		}
	}
}

// publish makes p's plane and group manager the running ones. The surviving
// Selector choices move over from old's manager, and every connectivity
// slot of the old or new layout reads alive (fail-open) until the new
// manager's exact snapshot follows the plane. A group write that loaded the
// old manager meanwhile fails on it as replaced and retries on the new one.
func (sv *Supervisor) publish(old *state, p *prepared) {
	var prev *group.Manager
	if old != nil {
		prev = old.groups
	}
	next := p.next.groups
	sv.publishMu.Lock()
	if next != nil {
		if prev != nil {
			next.Migrate(prev)
		}
		next.PublishFailOpen(prev)
	} else if prev != nil {
		prev.Migrate(nil)
	}
	sv.configureScore(next)
	sv.carryGlobal(sv.cell.Load(), p.plane)
	sv.cell.Store(p.plane)
	sv.groups.Store(next)
	sv.nodeIDs.Store(&p.next.nodeIDs)
	sv.balancerPub.Store(publishedBalancers(p.next))
	sv.publishMu.Unlock()
	if next != nil {
		next.PublishConnectivity()
	}
}
