package group

import (
	"fmt"

	"switchyard/netx"
)

// Clear drops a Selector's runtime choice on networks (none given: both):
// its effective member is the configured default again, else the first
// declared member. For every network whose choice was dropped it calls
// OnPersist with member ""; when the group interrupts and the effective
// member of a network changed, it calls OnInterrupt for the old member and
// returns the sum of what those calls closed, as Select does. A Clear on a
// Manager a reload already migrated from fails with ErrReplaced.
func (m *Manager) Clear(group string, networks ...netx.Network) (int, error) {
	if len(networks) == 0 {
		networks = []netx.Network{netx.TCP, netx.UDP}
	}
	for _, n := range networks {
		if n > netx.UDP {
			return 0, fmt.Errorf("group %q: unknown network %d", group, n)
		}
	}
	type change struct {
		net netx.Network
		old int32 // the effective member before
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
	for _, n := range networks {
		if g.choice[n].Load() == none {
			continue
		}
		changes[k] = change{net: n, old: g.effective(int(n))}
		k++
		g.choice[n].Store(none)
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
			m.o.OnPersist(group, c.net, "")
		}
	}
	m.markAll()
	m.emit()
	closed := 0
	if g.interr && m.o.OnInterrupt != nil {
		for _, c := range changes[:k] {
			if now := g.effective(int(c.net)); c.old >= 0 && c.old != now {
				closed += m.o.OnInterrupt(group, g.members[c.old].tag, c.net)
			}
		}
	}
	return closed, nil
}
