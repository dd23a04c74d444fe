package supervisor

import (
	"slices"
	"time"

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

// kind is a versioned kind. Outbounds, balancers and groups share one tag
// namespace, so a tag names one resource of one kind at a time.
type kind uint8

const (
	kindOutbound kind = iota
	kindBalancer
	kindGroup
)

func (k kind) String() string {
	switch k {
	case kindBalancer:
		return "balancer"
	case kindGroup:
		return "group"
	}
	return "outbound"
}

// buildKey is what building one resource reads: its own part (the spec
// without what is read only after the build) and the versions of the
// resources it reaches, in the order it names them. An apply reuses a
// running object exactly when the build key of its spec in the new spec
// equals the key it was built from; so a dependent is rebuilt when anything
// it reaches is.
type buildKey struct {
	own  any
	deps []uint32
}

// built is what the planner remembers of a running resource.
type built struct {
	kind    kind
	key     buildKey
	version uint32
}

type outboundStep struct {
	kind    stepKind
	spec    spec.Outbound
	key     buildKey
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
	key     buildKey
	version uint32
}

type groupStep struct {
	kind    stepKind
	spec    spec.Group
	key     buildKey
	version uint32
}

// thePlan is what an apply will do, decided from the running state and the
// new spec alone. It holds no built object.
type thePlan struct {
	outbounds []outboundStep // every outbound of the new spec, in spec order
	drains    []drainStep    // old versions of changed or removed outbounds
	balancers []balancerStep // every balancer of the new spec, in spec order
	groups    []groupStep    // every group of the new spec, in spec order
	// removedBalancers and removedGroups are running ones the new spec
	// drops (or gives their tag to another kind).
	removedBalancers []string
	removedGroups    []string
	// versions are the version counters after the apply, of every tag ever
	// seen, removed ones included, so a tag added back never reuses a
	// version whose flows may still be draining.
	versions map[string]uint32
	// built is what the next state remembers of each resource.
	built map[string]built
}

// outboundKey is the own part of an outbound's build key: its spec without
// its drain key (read only when its version is drained), and of the
// generation's dependencies the connect timeout, for a protocol that
// connects with it. The [socket] policy is fixed for the process, and
// [dial].max_concurrent_dials belongs to the generation, not to an
// outbound; neither is in the key. Every outbound but block holds the
// resolvers built from [dns] (or the DNS service), so [dns] is in its key:
// a change of it rebuilds them all.
type outboundKey struct {
	spec           spec.Outbound
	connectTimeout time.Duration
	dns            *spec.DNS
}

func outboundOwnKey(o spec.Outbound, s *spec.Spec) outboundKey {
	k := outboundKey{spec: o}
	k.spec.Drain = ""
	if dialsWithConnectTimeout(o) {
		k.connectTimeout = s.Dial.ConnectTimeout
	}
	if o.Type != "block" {
		k.dns = s.DNS
	}
	return k
}

// dialsWithConnectTimeout reports whether an outbound's build reads
// [dial].connect_timeout (outbound.Deps.ConnectTimeout, or the TCP connects
// of outbound.Deps.Dialer). block dials nothing; wireguard only binds its
// UDP socket under the policy and bounds connects inside the tunnel with
// its own fixed timeout. A protocol that starts reading it belongs here.
func dialsWithConnectTimeout(o spec.Outbound) bool {
	switch o.Type {
	case "block", "wireguard", "dns":
		return false
	}
	return true
}

// resource is one versioned resource of a spec for the planner: its kind,
// its position in its kind's list, the own part of its build key and the
// tags it reaches.
type resource struct {
	kind  kind
	index int
	own   any
	deps  []string
}

// resources lists every versioned resource of s by tag, and the tags in
// spec order (outbounds, balancers, groups).
func resources(s *spec.Spec) (map[string]resource, []string) {
	rs := make(map[string]resource, len(s.Outbounds)+len(s.Balancers)+len(s.Groups))
	order := make([]string, 0, len(s.Outbounds)+len(s.Balancers)+len(s.Groups))
	add := func(tag string, r resource) {
		if _, dup := rs[tag]; dup {
			return // the loader refuses duplicate tags; the first one wins here
		}
		rs[tag] = r
		order = append(order, tag)
	}
	for i, o := range s.Outbounds {
		add(o.Tag, resource{kind: kindOutbound, index: i, own: outboundOwnKey(o, s)})
	}
	for i, b := range s.Balancers {
		add(b.Tag, resource{kind: kindBalancer, index: i, own: b, deps: b.Members})
	}
	for i, g := range s.Groups {
		deps := g.Members
		if g.Final != "" {
			deps = append(slices.Clip(deps), g.Final)
		}
		add(g.Tag, resource{kind: kindGroup, index: i, own: g, deps: deps})
	}
	return rs, order
}

// plan gives every resource of next a version, in dependency order (what a
// resource reaches is decided before it): a build key equal to the running
// one's → reuse at the running version; otherwise, or new → build at the
// next version (an outbound's old version is drained). cur may be nil for
// the first apply.
//
// Groups may reach each other in a cycle (the group manager cuts it when it
// is built): an edge that closes a cycle, in the depth-first order of the
// spec, is left out of the key, so the plan is still decided in one pass
// and an unchanged cycle is reused. A change along a cycle moves every
// group after it in that order; the one whose edge closes the cycle moves
// only for a change it reaches otherwise. Every group of a generation is
// built afresh in its manager anyway: a group's version names what it is,
// for the flows and the logs.
func plan(cur *state, next *spec.Spec) *thePlan {
	p := &thePlan{versions: map[string]uint32{}, built: map[string]built{}}
	var running map[string]built
	if cur != nil {
		for t, v := range cur.versions {
			p.versions[t] = v
		}
		running = cur.built
	}
	rs, order := resources(next)
	const (
		unvisited = iota
		visiting
		decided
	)
	mark := make(map[string]uint8, len(rs))
	var visit func(tag string)
	visit = func(tag string) {
		r := rs[tag]
		mark[tag] = visiting
		for _, d := range r.deps {
			if _, ok := rs[d]; ok && mark[d] == unvisited {
				visit(d)
			}
		}
		key := buildKey{own: r.own}
		if len(r.deps) > 0 {
			key.deps = make([]uint32, len(r.deps))
			for i, d := range r.deps {
				// A cycle-closing edge (or an unknown tag, which the
				// build refuses) counts as version 0.
				if b, ok := p.built[d]; ok {
					key.deps[i] = b.version
				}
			}
		}
		b := built{kind: r.kind, key: key}
		if old, ok := running[tag]; ok && old.kind == r.kind && spec.Equal(old.key, key) {
			b.version = old.version
		} else {
			p.versions[tag]++
			b.version = p.versions[tag]
		}
		p.built[tag] = b
		mark[tag] = decided
	}
	for _, tag := range order {
		if mark[tag] == unvisited {
			visit(tag)
		}
	}
	stepOf := func(tag string) (stepKind, buildKey, uint32) {
		b := p.built[tag]
		if old, ok := running[tag]; ok && old.kind == b.kind && old.version == b.version {
			return stepReuse, b.key, b.version
		}
		return stepBuild, b.key, b.version
	}
	for _, o := range next.Outbounds {
		k, key, v := stepOf(o.Tag)
		p.outbounds = append(p.outbounds, outboundStep{kind: k, spec: o, key: key, version: v})
		if k == stepBuild && cur != nil {
			if r, ok := cur.outbounds[o.Tag]; ok {
				p.drains = append(p.drains, drainStep{tag: o.Tag, version: r.target.ID().Version, policy: drainPolicy(r.spec, o, next)})
			}
		}
	}
	for _, b := range next.Balancers {
		k, key, v := stepOf(b.Tag)
		p.balancers = append(p.balancers, balancerStep{kind: k, spec: b, key: key, version: v})
	}
	for _, g := range next.Groups {
		k, key, v := stepOf(g.Tag)
		p.groups = append(p.groups, groupStep{kind: k, spec: g, key: key, version: v})
	}
	if cur == nil {
		return p
	}
	// What the new spec drops, or names as another kind now.
	gone := func(tag string, k kind) bool {
		r, ok := rs[tag]
		return !ok || r.kind != k
	}
	for _, tag := range sortedKeys(cur.outbounds) {
		if gone(tag, kindOutbound) {
			r := cur.outbounds[tag]
			p.drains = append(p.drains, drainStep{tag: tag, version: r.target.ID().Version, policy: drainPolicy(r.spec, spec.Outbound{}, next), removed: true})
		}
	}
	for _, tag := range sortedKeys(cur.balancers) {
		if gone(tag, kindBalancer) {
			p.removedBalancers = append(p.removedBalancers, tag)
		}
	}
	for _, tag := range sortedKeys(cur.groupRuns) {
		if gone(tag, kindGroup) {
			p.removedGroups = append(p.removedGroups, tag)
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
