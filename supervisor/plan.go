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

type outboundStep struct {
	kind    stepKind
	spec    spec.Outbound
	key     outboundKey
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
	key     balancerKey
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

// An apply reuses a running object exactly when the build key of its spec in
// the new spec equals the key it was built from. A build key holds what the
// build reads and nothing else: a key read only after the build is left out,
// so changing it alone never rebuilds. Every versioned kind has one.

// outboundKey is what building an outbound reads: its own spec without its
// drain key (read only when its version is drained), and of the generation's
// dependencies the connect timeout, for a protocol that connects with it.
// The [socket] policy is fixed for the process, and [dial].max_concurrent_dials
// belongs to the generation, not to an outbound; neither is in the key.
type outboundKey struct {
	spec           spec.Outbound
	connectTimeout time.Duration
}

func outboundBuildKey(o spec.Outbound, s *spec.Spec) outboundKey {
	k := outboundKey{spec: o}
	k.spec.Drain = ""
	if dialsWithConnectTimeout(o) {
		k.connectTimeout = s.Dial.ConnectTimeout
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
	case "block", "wireguard":
		return false
	}
	return true
}

// balancerKey is what building a balancer reads: its spec and the versions
// of its members, whose targets it holds.
type balancerKey struct {
	spec    spec.Balancer
	members []uint32
}

func balancerBuildKey(b spec.Balancer, versions map[string]uint32) balancerKey {
	k := balancerKey{spec: b, members: make([]uint32, len(b.Members))}
	for i, m := range b.Members {
		k.members[i] = versions[m]
	}
	return k
}

// plan gives every outbound and balancer tag of next a version: a build key
// equal to the running one's → reuse at the running version; otherwise, or
// new → build at the next version, draining the old one. cur may be nil for
// the first apply.
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
	seen := map[string]bool{}
	for _, o := range next.Outbounds {
		seen[o.Tag] = true
		key := outboundBuildKey(o, next)
		var running *runOutbound
		if cur != nil {
			running = cur.outbounds[o.Tag]
		}
		if running != nil && spec.Equal(running.key, key) {
			p.outbounds = append(p.outbounds, outboundStep{kind: stepReuse, spec: o, key: key, version: running.target.ID().Version})
			continue
		}
		p.versions[o.Tag]++
		p.outbounds = append(p.outbounds, outboundStep{kind: stepBuild, spec: o, key: key, version: p.versions[o.Tag]})
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
	after := make(map[string]uint32, len(p.outbounds)) // the version of every outbound after the apply
	for _, st := range p.outbounds {
		after[st.spec.Tag] = st.version
	}
	seenBal := map[string]bool{}
	for _, b := range next.Balancers {
		seenBal[b.Tag] = true
		key := balancerBuildKey(b, after)
		var running *runBalancer
		if cur != nil {
			running = cur.balancers[b.Tag]
		}
		if running != nil && spec.Equal(running.key, key) {
			p.balancers = append(p.balancers, balancerStep{kind: stepReuse, spec: b, key: key, version: running.version})
			continue
		}
		p.balancerVersions[b.Tag]++
		p.balancers = append(p.balancers, balancerStep{kind: stepBuild, spec: b, key: key, version: p.balancerVersions[b.Tag]})
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
