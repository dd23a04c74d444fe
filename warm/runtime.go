package warm

import (
	"strings"
	"sync/atomic"
	"time"

	"switchyard/health"
	"switchyard/outbound"
)

// Owner is a retention bit on a runtime.
type Owner uint32

const (
	// OwnSelector: a Selector's TCP choice.
	OwnSelector Owner = 1 << iota
	// OwnUDP: a member of the UDP warm set.
	OwnUDP
)

func (o Owner) String() string {
	var parts []string
	if o&OwnSelector != 0 {
		parts = append(parts, "selector")
	}
	if o&OwnUDP != 0 {
		parts = append(parts, "udp")
	}
	return strings.Join(parts, "+")
}

// Owners are the bits by name, in the order the API and the metrics list
// them.
var Owners = [...]struct {
	Bit  Owner
	Name string
}{{OwnSelector, "selector"}, {OwnUDP, "udp"}}

// Node is one proxy node of the running configuration whose outbound can
// warm what it reuses.
type Node struct {
	ID      health.NodeID
	Version uint32 // the outbound version: a changed node has another
	Name    string // the outbound tag, for logs and the API
	Out     outbound.Warmer
	// UDP: the outbound carries datagrams (outbound.CarriesUDP).
	UDP bool
}

type key struct {
	id      health.NodeID
	version uint32
}

func (n Node) key() key { return key{n.ID, n.Version} }

// Runtime is one node's reusable state and who retains it.
type Runtime struct {
	node   Node
	owners atomic.Uint32
	busy   atomic.Bool // an attempt is under way
	// The last attempt that opened something or failed, for the API.
	lastAt  atomic.Int64 // unix nanoseconds; 0: none yet
	lastErr atomic.Pointer[string]
	cooled  atomic.Bool // dropped by a reload: its last cool is done
}

// Node is the node the runtime belongs to.
func (r *Runtime) Node() Node { return r.node }

// Owners are the retention bits held now.
func (r *Runtime) Owners() Owner { return Owner(r.owners.Load()) }

// setOwners replaces the bits and returns the previous ones.
func (r *Runtime) setOwners(o Owner) Owner { return Owner(r.owners.Swap(uint32(o))) }

// State is a reading of one runtime.
type State struct {
	Name    string
	ID      health.NodeID
	Version uint32
	Kind    outbound.WarmKind
	Owners  Owner
	Pooled  int  // pool: connections waiting
	Up      bool // session: established
	// IdleBound is a pool's idle bound, Learning whether it is still
	// being learned (see internal/connpool).
	IdleBound time.Duration
	Learning  bool
	// LastAttempt is when an attempt last opened something or failed,
	// LastError its error ("" on success).
	LastAttempt time.Time
	LastError   string
}

// State reads the runtime: atomics and the outbound's own published
// state, no lock.
func (r *Runtime) State() State {
	w := r.node.Out.Warmth()
	st := State{Name: r.node.Name, ID: r.node.ID, Version: r.node.Version, Kind: w.Kind, Owners: r.Owners(), Pooled: w.Pooled, Up: w.Up,
		IdleBound: w.IdleBound, Learning: w.Learning}
	if at := r.lastAt.Load(); at != 0 {
		st.LastAttempt = time.Unix(0, at)
	}
	if e := r.lastErr.Load(); e != nil {
		st.LastError = *e
	}
	return st
}

func (r *Runtime) noteAttempt(at time.Time, err error) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	r.lastErr.Store(&msg)
	r.lastAt.Store(at.UnixNano())
}
