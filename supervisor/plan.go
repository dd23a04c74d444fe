package supervisor

import (
	"slices"

	"switchyard/spec"
)

// stepKind is what an apply does with one versioned resource.
type stepKind uint8

const (
	stepReuse stepKind = iota // keep the running object at its version
	stepBuild                 // build the next version
)

func (k stepKind) String() string {
	if k == stepBuild {
		return "built"
	}
	return "reused"
}

type outboundStep struct {
	kind    stepKind
	spec    spec.Outbound
	version uint32
}

type drainStep struct {
	tag     string
	version uint32
	policy  spec.Drain
	removed bool
}

type balancerStep struct {
	kind    stepKind
	spec    spec.Balancer
	version uint32
}

// thePlan is what an apply will do, decided from the running state and the
// new spec alone. It holds no built object.
type thePlan struct {
	outbounds []outboundStep // every outbound of the new spec, in spec order
	drains    []drainStep    // old versions of changed or removed outbounds
	balancers []balancerStep // every balancer of the new spec
	// removedBalancers are running balancers the new spec drops.
	removedBalancers []string
	// versions and balancerVersions are the version counters after the
	// apply, removed tags included, so a tag added back never reuses a
	// version whose flows may still be draining.
	versions         map[string]uint32
	balancerVersions map[string]uint32
}

// depsChanged reports whether what every outbound is built with changed: an
// outbound holds a dialer and resolvers built from these, so a change rebuilds
// every outbound that uses them (every one but block).
func depsChanged(old, next *spec.Spec) bool {
	return !spec.Equal(old.Dial, next.Dial)
}

// usesDeps reports whether an outbound holds the dialer or a resolver.
func usesDeps(o spec.Outbound) bool { return o.Type != "block" }

// plan gives every outbound and balancer tag of next a version: unchanged →
// reuse at the running version; changed or new → build at the next version,
// draining the old one. cur may be nil for the first apply.
func plan(cur *state, next *spec.Spec) *thePlan {
	p := &thePlan{versions: map[string]uint32{}, balancerVersions: map[string]uint32{}}
	if cur != nil {
		for t, v := range cur.versions {
			p.versions[t] = v
		}
		for t, v := range cur.balancerVersions {
			p.balancerVersions[t] = v
		}
	}
	rebuildAll := cur != nil && depsChanged(cur.spec, next)
	rebuilt := map[string]bool{}
	seen := map[string]bool{}
	for _, o := range next.Outbounds {
		seen[o.Tag] = true
		var running *runOutbound
		if cur != nil {
			running = cur.outbounds[o.Tag]
		}
		if running != nil && spec.Equal(running.spec, o) && !(rebuildAll && usesDeps(o)) {
			p.outbounds = append(p.outbounds, outboundStep{kind: stepReuse, spec: o, version: running.target.ID().Version})
			continue
		}
		p.versions[o.Tag]++
		p.outbounds = append(p.outbounds, outboundStep{kind: stepBuild, spec: o, version: p.versions[o.Tag]})
		rebuilt[o.Tag] = true
		if running != nil {
			p.drains = append(p.drains, drainStep{tag: o.Tag, version: running.target.ID().Version, policy: drainPolicy(running.spec, o, next)})
		}
	}
	if cur != nil {
		for _, tag := range sortedKeys(cur.outbounds) {
			if !seen[tag] {
				r := cur.outbounds[tag]
				p.drains = append(p.drains, drainStep{tag: tag, version: r.target.ID().Version, policy: drainPolicy(r.spec, spec.Outbound{}, next), removed: true})
			}
		}
	}
	seenBal := map[string]bool{}
	for _, b := range next.Balancers {
		seenBal[b.Tag] = true
		var running *runBalancer
		if cur != nil {
			running = cur.balancers[b.Tag]
		}
		membersKept := !slices.ContainsFunc(b.Members, func(m string) bool { return rebuilt[m] })
		if running != nil && spec.Equal(running.spec, b) && membersKept {
			p.balancers = append(p.balancers, balancerStep{kind: stepReuse, spec: b, version: running.version})
			continue
		}
		p.balancerVersions[b.Tag]++
		p.balancers = append(p.balancers, balancerStep{kind: stepBuild, spec: b, version: p.balancerVersions[b.Tag]})
	}
	if cur != nil {
		for _, tag := range sortedKeys(cur.balancers) {
			if !seenBal[tag] {
				p.removedBalancers = append(p.removedBalancers, tag)
			}
		}
	}
	return p
}

// drainPolicy is what the old version's flows get: the outbound's own drain
// key in the new spec, else the old version's own key, else [reload].drain.
func drainPolicy(old, next spec.Outbound, s *spec.Spec) spec.Drain {
	switch {
	case next.Drain != "":
		return next.Drain
	case old.Drain != "":
		return old.Drain
	case s.Reload.Drain != "":
		return s.Reload.Drain
	}
	return spec.DrainKeep
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
