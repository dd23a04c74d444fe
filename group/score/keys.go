package score

import (
	"fmt"
	"log/slog"

	"switchyard/health"
	"switchyard/netx"
)

// GroupID is a Score group's identity: its UUID (group.Identity.ID), kept
// across reloads while the group's name is unchanged. A display name is
// never an identity.
type GroupID [16]byte

// Scope names one business flow's evidence: the Score group that selected
// it, its network, its target's family, its target and the leaf node that
// carried it. Target is the zero Addr for targetless work; an IP target's
// own family overrides Family.
//
// A Scope holds node and target identities, which never leave the
// scorer: String, GoString, LogValue and MarshalJSON print only the
// network and family.
type Scope struct {
	Group   GroupID
	Network netx.Network
	Family  netx.Family
	Target  netx.Addr
	Node    health.NodeID
}

// String prints the network and family only.
func (s Scope) String() string { return fmt.Sprintf("score scope (%v, %v)", s.Network, s.Family) }

// GoString is String, so %#v does not print identities either.
func (s Scope) GoString() string { return s.String() }

// LogValue keeps identities out of structured logs.
func (s Scope) LogValue() slog.Value {
	return slog.GroupValue(slog.String("network", s.Network.String()), slog.String("family", s.Family.String()))
}

// MarshalJSON exports the network and family only.
func (s Scope) MarshalJSON() ([]byte, error) {
	return fmt.Appendf(nil, `{"network":%q,"family":%q}`, s.Network, s.Family), nil
}

// noFamily is the family slot of the global aggregate.
const noFamily = 0xff

// aggKey keys an aggregate cell: (group, network, family or none, node).
type aggKey struct {
	group GroupID
	node  health.NodeID
	net   netx.Network
	fam   uint8 // a netx.Family, or noFamily for the global aggregate
}

// exactKey keys an exact cell: (group, network, family, target, node).
type exactKey struct {
	group GroupID
	node  health.NodeID
	net   netx.Network
	fam   netx.Family
	tgt   target
}

// member is a (group, node) pair of the configuration.
type member struct {
	group GroupID
	node  health.NodeID
}

func (k aggKey) member() member   { return member{k.group, k.node} }
func (k exactKey) member() member { return member{k.group, k.node} }

func (k aggKey) global() aggKey {
	k.fam = noFamily
	return k
}

func (k exactKey) family() aggKey {
	return aggKey{group: k.group, node: k.node, net: k.net, fam: uint8(k.fam)}
}

func (k exactKey) global() aggKey { return k.family().global() }
