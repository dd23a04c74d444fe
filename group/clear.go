package group

import "switchyard/netx"

// Clear drops a Selector's runtime choice on networks (none given: both):
// its effective member is the configured default again, else the first
// declared member. For every network whose choice was dropped it calls
// OnPersist with member ""; when the group interrupts and the effective
// member of a network changed, it calls OnInterrupt for the old member and
// returns the sum of what those calls closed, and reports the switch, as
// Select does. A Clear on a Manager a reload already migrated from fails
// with ErrReplaced.
func (m *Manager) Clear(group string, networks ...netx.Network) (int, error) {
	return m.write(group, "", false, networks)
}
