package plane

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
)

// GlobalTag is the GLOBAL selector's tag. It is reserved: no outbound,
// balancer or group may have it.
const GlobalTag = "GLOBAL"

// ErrNotGlobalMember refuses a GLOBAL choice that names no outbound,
// balancer or group of the plane.
var ErrNotGlobalMember = errors.New("not a member of GLOBAL")

// Global is the GLOBAL selector of one plane: a chooser over every
// routable target (groups, balancers, outbounds) whose choice is written
// by hand, and whose default is the plane's final target. In ModeGlobal
// every flow routes to it. Its choice is read with one atomic load per
// flow; a reload builds a new Global and carries the choice over (see
// Carry).
type Global struct {
	members []string
	targets map[string]*Target
	def     string
	target  *Target
	chosen  atomic.Pointer[globalPick] // nil: the default
}

type globalPick struct {
	tag string
	t   *Target
}

// NewGlobal is the GLOBAL selector over members (in the order it lists
// them), each the tag of a target in targets, defaulting to def (a
// member). version is the chooser target's version (the plane's epoch).
func NewGlobal(members []string, targets map[string]*Target, def string, version uint32) (*Global, error) {
	g := &Global{members: slices.Clone(members), targets: make(map[string]*Target, len(members)), def: def}
	for _, m := range members {
		t, ok := targets[m]
		if !ok {
			return nil, fmt.Errorf("GLOBAL member %q has no target", m)
		}
		g.targets[m] = t
	}
	if _, ok := g.targets[def]; !ok {
		return nil, fmt.Errorf("GLOBAL default %q: %w", def, ErrNotGlobalMember)
	}
	g.target = NewChooserTarget(OutboundID{Tag: GlobalTag, Version: version}, g)
	return g, nil
}

// Target is the chooser target flows in global mode route to.
func (g *Global) Target() *Target { return g.target }

// Members are the tags GLOBAL chooses among, in order.
func (g *Global) Members() []string { return slices.Clone(g.members) }

// Default is the member GLOBAL goes to without a choice: the final target.
func (g *Global) Default() string { return g.def }

// Now is the member GLOBAL goes to: the choice, else the default.
func (g *Global) Now() string {
	if p := g.chosen.Load(); p != nil {
		return p.tag
	}
	return g.def
}

// Chosen is the choice written by hand, if any.
func (g *Global) Chosen() (string, bool) {
	if p := g.chosen.Load(); p != nil {
		return p.tag, true
	}
	return "", false
}

// Select makes member the choice; a name that is no member is
// ErrNotGlobalMember.
func (g *Global) Select(member string) error {
	t, ok := g.targets[member]
	if !ok {
		return fmt.Errorf("%q: %w", member, ErrNotGlobalMember)
	}
	g.chosen.Store(&globalPick{tag: member, t: t})
	return nil
}

// Clear drops the choice: GLOBAL goes to its default again.
func (g *Global) Clear() { g.chosen.Store(nil) }

// Carry sets on g the choice old had, when g has a member of that tag and
// it is the same thing: the same outbound node, or a balancer or group
// both times. It reports the choice old had (ok false when none) and
// whether it carried.
func (g *Global) Carry(old *Global) (tag string, had, carried bool) {
	if old == nil {
		return "", false, false
	}
	p := old.chosen.Load()
	if p == nil {
		return "", false, false
	}
	t, ok := g.targets[p.tag]
	if !ok || t.IsChooser() != p.t.IsChooser() || t.Node() != p.t.Node() {
		return p.tag, true, false
	}
	g.chosen.Store(&globalPick{tag: p.tag, t: t})
	return p.tag, true, true
}

func (g *Global) current() *Target {
	if p := g.chosen.Load(); p != nil {
		return p.t
	}
	return g.targets[g.def]
}

// Choose is the leaf of the member GLOBAL goes to (Chooser): the member
// itself for an outbound, what it picks for a balancer or group, whose
// tag it pushes onto the chain.
func (g *Global) Choose(q *Query) *Target {
	t := g.current()
	if t.ch == nil {
		return t
	}
	if !q.Push(t.id.Tag) {
		return nil
	}
	return t.ch.Choose(q)
}

// Retry is the retry round of the member GLOBAL went to (Retrier).
func (g *Global) Retry(q *Query, failed *Target) []*Target {
	return g.current().Retry(q, failed)
}
