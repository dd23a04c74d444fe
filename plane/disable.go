package plane

import (
	"fmt"
	"sync"
	"sync/atomic"

	"switchyard/netx"
)

// ruleSwitch holds the rules switched off at run time (mihomo's PATCH
// /rules/disable), for the plane it belongs to: a reload builds a plane
// with every rule on, as mihomo's rebuilt rules are. Route reads one
// atomic pointer per flow, nil while no rule is off.
type ruleSwitch struct {
	mu  sync.Mutex // serializes writers
	off atomic.Pointer[[]bool]
}

// SetDisabled switches the rules of the given indexes off (true) or back
// on (false) for the flows routed after it; open flows keep their route.
// An index that is no rule (the final target included) is an error, and
// then nothing changes.
func (p *Plane) SetDisabled(change map[int]bool) error {
	for i := range change {
		if i < 0 || i >= len(p.Rules) {
			return fmt.Errorf("no rule of index %d (the rules are 0 to %d)", i, len(p.Rules)-1)
		}
	}
	p.switches.mu.Lock()
	defer p.switches.mu.Unlock()
	next := make([]bool, len(p.Rules))
	if cur := p.switches.off.Load(); cur != nil {
		copy(next, *cur)
	}
	for i, v := range change {
		next[i] = v
	}
	someOff := false
	for _, v := range next {
		someOff = someOff || v
	}
	if !someOff {
		p.switches.off.Store(nil)
		return nil
	}
	p.switches.off.Store(&next)
	return nil
}

// Disabled reports, in rule order, which rules are switched off.
func (p *Plane) Disabled() []bool {
	out := make([]bool, len(p.Rules))
	if cur := p.switches.off.Load(); cur != nil {
		copy(out, *cur)
	}
	return out
}

// routeSkipping is Route's rule loop past the rules switched off (off),
// apart so that the loop with none off checks nothing.
func (p *Plane) routeSkipping(f *netx.Flow, off []bool) (*Target, int) {
	for i := range p.Rules {
		if !off[i] && p.Rules[i].Match.Match(f) {
			return p.Rules[i].Target, i
		}
	}
	return p.Final, Final
}

// offRules is the switched-off table Route reads, nil when none is off.
func (p *Plane) offRules() []bool {
	if cur := p.switches.off.Load(); cur != nil {
		return *cur
	}
	return nil
}
