package group

import (
	"fmt"

	"switchyard/health"
	"switchyard/netx"
)

// Select writes a Selector's choice: member for each of networks (none
// given: both, as a Clash write does; the native API writes TCP, UDP or
// both at once). The name binds the first declared member with that tag.
// For every network whose stored choice changed it calls OnPersist; when
// the group interrupts and the effective member of a network changed, it
// calls OnInterrupt for the old member and returns the sum of what those
// calls closed, once they returned. Callbacks run after the write is
// committed and no lock of the Manager is held.
//
// A Select on a Manager a reload already migrated from fails with
// ErrReplaced: the caller writes to the Manager now published (see
// Migrate), so no write is acknowledged on a replaced Manager.
func (m *Manager) Select(group, member string, networks ...netx.Network) (int, error) {
	return m.write(group, member, true, networks)
}

// write stores a Selector's choice on networks (none given: both): member
// when set, else no choice (the default again). See Select and Clear.
func (m *Manager) write(group, member string, set bool, networks []netx.Network) (int, error) {
	if len(networks) == 0 {
		networks = []netx.Network{netx.TCP, netx.UDP}
	}
	for _, n := range networks {
		if n > netx.UDP {
			return 0, fmt.Errorf("group %q: unknown network %d", group, n)
		}
	}
	type change struct {
		net      netx.Network
		old, now int32 // the effective member before and after
	}
	var changes [2]change
	k := 0
	m.mu.Lock()
	if m.replaced {
		m.mu.Unlock()
		return 0, ErrReplaced
	}
	gi, ok := m.byTag[group]
	if !ok {
		m.mu.Unlock()
		return 0, fmt.Errorf("group %q: %w", group, ErrUnknownGroup)
	}
	g := &m.groups[gi]
	if g.pol != selector {
		m.mu.Unlock()
		return 0, fmt.Errorf("group %q is a %s group: %w", group, g.pol, ErrNotSelector)
	}
	mi := none
	if set {
		if mi = g.memberIndex(member); mi < 0 {
			m.mu.Unlock()
			return 0, fmt.Errorf("group %q: %q: %w", group, member, ErrNotMember)
		}
	}
	for _, n := range networks {
		if g.choice[n].Load() == mi {
			continue
		}
		old := g.effective(int(n))
		g.choice[n].Store(mi)
		changes[k] = change{net: n, old: old, now: g.effective(int(n))}
		k++
	}
	if k > 0 {
		m.soles()
		m.gen.Add(1)
	}
	m.mu.Unlock()
	if k == 0 {
		return 0, nil
	}
	if m.o.OnPersist != nil {
		for _, c := range changes[:k] {
			m.o.OnPersist(group, c.net, member)
		}
	}
	m.markAll()
	m.emit()
	for _, c := range changes[:k] {
		if c.old >= 0 && c.old != c.now {
			m.switched(g, int(c.net), SwitchManual)
		}
	}
	closed := 0
	if g.interr && m.o.OnInterrupt != nil {
		for _, c := range changes[:k] {
			if c.old >= 0 && c.old != c.now {
				closed += m.o.OnInterrupt(group, g.members[c.old].tag, c.net)
			}
		}
	}
	return closed, nil
}

// Restore sets a persisted Selector choice at start, before the Manager is
// published, by member name. It reports whether it applied: an unknown
// group, a group that is not a selector or a name that is not a member is
// ignored. It calls no callback.
func (m *Manager) Restore(group string, network netx.Network, member string) bool {
	if network > netx.UDP {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	gi, ok := m.byTag[group]
	if !ok || m.groups[gi].pol != selector {
		return false
	}
	g := &m.groups[gi]
	mi := g.memberIndex(member)
	if mi < 0 {
		return false
	}
	g.choice[network].Store(mi)
	m.soles()
	m.gen.Add(1)
	return true
}

// memberKey is a member's identity across a reload: a leaf's NodeID (its
// tag when it has none), a sub-group's Identity.ID, a balancer's tag.
type memberKey struct {
	kind kind
	node health.NodeID
	gid  [16]byte
	tag  string
}

func (m *Manager) key(e *edge) memberKey {
	k := memberKey{kind: e.kind}
	switch e.kind {
	case kindLeaf:
		k.node = m.leaves[e.idx].Node
		if k.node.IsZero() {
			k.tag = e.tag
		}
	case kindGroup:
		k.gid = m.groups[e.idx].id.ID
	default:
		k.tag = e.tag
	}
	return k
}

// Migrate carries old's Selector runtime choices over to m, per network
// and by member identity (a leaf's NodeID, a sub-group's Identity.ID): a
// node rebuilt under its NodeID keeps the choice, a node removed and added
// back (a new NodeID) does not, so the choice falls back to the default.
// A group is matched by tag and, when both have one, Identity.ID.
//
// Migrate marks old replaced: a Select on old after it returns
// ErrReplaced. The supervisor calls it in the commit of a reload, after
// everything that can fail, and publishes m right after, holding across
// both the lock under which Select callers load the published Manager —
// so a write either lands on old before the copy or on m after
// publication.
func (m *Manager) Migrate(old *Manager) {
	if old == nil || old == m {
		return
	}
	type saved struct {
		tag    string
		id     [16]byte
		choice [2]memberKey
		has    [2]bool
	}
	var keep []saved
	old.mu.Lock()
	old.replaced = true
	for i := range old.groups {
		g := &old.groups[i]
		if g.pol != selector {
			continue
		}
		s := saved{tag: g.tag, id: g.id.ID}
		for n := range g.choice {
			if c := g.choice[n].Load(); c >= 0 {
				s.choice[n], s.has[n] = old.key(&g.members[c]), true
			}
		}
		if s.has[0] || s.has[1] {
			keep = append(keep, s)
		}
	}
	old.mu.Unlock()

	m.mu.Lock()
	defer m.mu.Unlock()
	var zero [16]byte
	for _, s := range keep {
		gi, ok := m.byTag[s.tag]
		if !ok {
			continue
		}
		g := &m.groups[gi]
		if g.pol != selector || s.id != zero && g.id.ID != zero && s.id != g.id.ID {
			continue
		}
		for n := range g.choice {
			if !s.has[n] {
				continue
			}
			for j := range g.members {
				if m.key(&g.members[j]) == s.choice[n] {
					g.choice[n].Store(int32(j))
					break
				}
			}
		}
	}
	m.soles()
	m.gen.Add(1)
}
