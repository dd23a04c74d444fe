// Package plane is the published routing snapshot: the rules, the targets
// keyed by tag, and the epoch. A Plane is immutable once published (but for
// its rules' hit counts and on/off switches, atomics of their own); the Cell
// swaps it with one atomic store and every flow (every UDP packet) loads it
// once.
package plane

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"sync"
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
	// DNS, when set, is the in-process DNS service's target: every flow
	// an inbound hands over toward port 53 goes there, before any rule.
	// The process's own queries (a flow with no inbound) are not taken.
	DNS *Target
	// FakeIPs, when set, maps the fake addresses the DNS service answered
	// with back to their names (see Unfake).
	FakeIPs FakeIPs
	// Mode, when set, is the routing mode in force (nil: ModeRule). In
	// ModeGlobal a flow routes to Global, in ModeDirect to Direct, after
	// the DNS interception and without the rules.
	Mode *ModeCell
	// Global is the plane's GLOBAL selector; Direct the direct outbound's
	// target. A mode whose target is nil routes by the rules.
	Global *Global
	Direct *Target
	// Blocks are the indexes of the rules that send to a block outbound,
	// in order: they apply in every mode (a block of port 53, of ads),
	// before the mode's target.
	Blocks []int

	// hits counts, per rule and then for the final target, the flows
	// routed by it: each TCP flow, and each UDP sub-link opened (not each
	// packet). Made with the plane's first Hit; see Hits.
	hitsOnce sync.Once
	hits     []atomic.Uint64
	// switches are the rules switched off at run time (disable.go).
	switches ruleSwitch
}

func (p *Plane) hitTable() []atomic.Uint64 {
	p.hitsOnce.Do(func() { p.hits = make([]atomic.Uint64, len(p.Rules)+1) })
	return p.hits
}

// Hit counts one flow routed by the rule of index i (Final for the final
// target; Intercepted is not counted).
func (p *Plane) Hit(i int) {
	h := p.hitTable()
	switch {
	case i == Final:
		h[len(h)-1].Add(1)
	case i >= 0 && i < len(h)-1:
		h[i].Add(1)
	}
}

// Hits returns the flows each rule routed since the plane was published,
// in rule order, and the final target's last.
func (p *Plane) Hits() []uint64 {
	h := p.hitTable()
	out := make([]uint64, len(h))
	for i := range h {
		out[i] = h[i].Load()
	}
	return out
}

// FakeIPs is the fake IP table as the plane reads it.
type FakeIPs interface {
	// Contains reports whether ip is in a fake range.
	Contains(ip netip.Addr) bool
	// Name is the name ip was handed out for.
	Name(ip netip.Addr) (string, bool)
}

// ErrNoFakeIPMapping refuses a flow to a fake address that maps to no name
// (a mapping recycled or lost): it is never dialed to the fake address.
var ErrNoFakeIPMapping = errors.New("a fake IP with no name behind it")

// Unfake gives a destination in a fake range its name back, keeping the
// port, so the flow routes, sniffs and dials as the name (the proxy
// resolves it). A fake address with no mapping is ErrNoFakeIPMapping.
func (p *Plane) Unfake(dst netx.Addr) (netx.Addr, error) {
	if p.FakeIPs == nil || dst.Name != "" || !p.FakeIPs.Contains(dst.IP) {
		return dst, nil
	}
	name, ok := p.FakeIPs.Name(dst.IP)
	if !ok {
		return dst, fmt.Errorf("%s: %w", dst, ErrNoFakeIPMapping)
	}
	return netx.Addr{Name: name, Port: dst.Port}, nil
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

// Final is the rule index Route reports when no rule matched; Intercepted
// the one of a port-53 flow the DNS service took.
const (
	Final       = -1
	Intercepted = -2
	// RoutedGlobal and RoutedDirect are the indexes of a flow routed by
	// the global and the direct mode.
	RoutedGlobal = -3
	RoutedDirect = -4
)

// Route returns the target of the first rule f matches, or the final target,
// and the index of that rule (Final when none matched); a rule switched
// off (SetDisabled) matches nothing. A flow from an
// inbound toward port 53 goes to the DNS service when there is one
// (Intercepted). In global and direct mode the block rules (Blocks) still
// apply, and every other flow goes to the GLOBAL selector (RoutedGlobal) or
// to direct (RoutedDirect).
func (p *Plane) Route(f *netx.Flow) (*Target, int) {
	if p.DNS != nil && f.Dst.Port == 53 && f.Inbound != "" {
		return p.DNS, Intercepted
	}
	switch p.Mode.Load() {
	case ModeGlobal:
		if p.Global != nil {
			return p.blocked(f, p.Global.target, RoutedGlobal)
		}
	case ModeDirect:
		if p.Direct != nil {
			return p.blocked(f, p.Direct, RoutedDirect)
		}
	}
	if off := p.offRules(); off != nil {
		return p.routeSkipping(f, off)
	}
	for i := range p.Rules {
		if p.Rules[i].Match.Match(f) {
			return p.Rules[i].Target, i
		}
	}
	return p.Final, Final
}

// blocked is the first block rule f matches, else the mode's target t.
func (p *Plane) blocked(f *netx.Flow, t *Target, i int) (*Target, int) {
	off := p.offRules()
	for _, b := range p.Blocks {
		if off != nil && off[b] {
			continue
		}
		if p.Rules[b].Match.Match(f) {
			return p.Rules[b].Target, b
		}
	}
	return t, i
}

// RuleName is how flows name the rule that routed them: "rule N" (1-based, in
// file order), "final", "dns", or the mode: "global", "direct".
func RuleName(i int) string {
	switch i {
	case Final:
		return "final"
	case Intercepted:
		return "dns"
	case RoutedGlobal:
		return "global"
	case RoutedDirect:
		return "direct"
	}
	return "rule " + strconv.Itoa(i+1)
}

// Cell holds the current plane.
type Cell struct{ p atomic.Pointer[Plane] }

// Load returns the current plane.
func (c *Cell) Load() *Plane { return c.p.Load() }

// Store publishes p.
func (c *Cell) Store(p *Plane) { c.p.Store(p) }
