// Package plane is the published routing snapshot: the rules, the targets
// keyed by tag, and the epoch. A Plane is immutable once published; the Cell
// swaps it with one atomic store and every flow (every UDP packet) loads it
// once.
package plane

import (
	"context"
	"strconv"
	"sync/atomic"
	"time"

	"switchyard/netx"
	"switchyard/route"
)

// Rule is one compiled rule and the target it sends to.
type Rule struct {
	Match  route.Rule
	Target *Target
}

// Plane is one routing snapshot, and the generation's dial limits: every
// dial routed on it runs under its admission and establishment deadline.
type Plane struct {
	Epoch   uint64
	Rules   []Rule
	Final   *Target
	Targets map[string]*Target // every outbound tag
	// Admission bounds the generation's physical connects and handshakes
	// in flight (nil: unbounded).
	Admission *netx.Admission
	// Establish is the establishment deadline of each dial (0: the one of
	// the default connect timeout).
	Establish time.Duration
}

// EstablishTimeout is the establishment deadline of a dial routed on p.
func (p *Plane) EstablishTimeout() time.Duration {
	if p.Establish <= 0 {
		return netx.EstablishTimeout(0)
	}
	return p.Establish
}

// Begin starts the establishment of one dial routed on p: see netx.Begin.
func (p *Plane) Begin(parent context.Context) (*netx.Establishment, context.Context, context.CancelFunc) {
	return netx.Begin(parent, p.Admission, p.EstablishTimeout())
}

// Final is the rule index Route reports when no rule matched.
const Final = -1

// Route returns the target of the first rule f matches, or the final target,
// and the index of that rule (Final when none matched).
func (p *Plane) Route(f *netx.Flow) (*Target, int) {
	for i := range p.Rules {
		if p.Rules[i].Match.Match(f) {
			return p.Rules[i].Target, i
		}
	}
	return p.Final, Final
}

// RuleName is how flows name the rule that routed them: "rule N" (1-based, in
// file order) or "final".
func RuleName(i int) string {
	if i == Final {
		return "final"
	}
	return "rule " + strconv.Itoa(i+1)
}

// Cell holds the current plane.
type Cell struct{ p atomic.Pointer[Plane] }

// Load returns the current plane.
func (c *Cell) Load() *Plane { return c.p.Load() }

// Store publishes p.
func (c *Cell) Store(p *Plane) { c.p.Store(p) }
