package supervisor

import (
	"switchyard/balancer"
	"switchyard/group"
	"switchyard/health"
	"switchyard/internal/pressure"
	"switchyard/plane"
	"switchyard/spec"
)

// state is what runs: the spec it came from (without its rules, which the
// plane holds compiled), each outbound's running version, each balancer and
// group, the build key and version of each, and the version counters of
// every tag ever seen.
type state struct {
	spec      *spec.Spec
	outbounds map[string]*runOutbound
	balancers map[string]*runBalancer
	built     map[string]built
	versions  map[string]uint32
	epoch     uint64
	// nodeIDs is each outbound tag's node identity; groups is the
	// generation's group manager (nil without groups) and groupRuns each
	// group's version.
	nodeIDs   map[string]health.NodeID
	groups    *group.Manager
	groupRuns map[string]*runGroup
}

// runGroup is a group at its version: the manager of the generation holds
// its state; the version moves when its spec or anything it reaches does.
type runGroup struct {
	spec    spec.Group
	version uint32
}

// runOutbound is a running outbound version: the spec of the last apply
// that kept it (whose drain key its flows get when it is drained), the build
// key it was built from, and its target.
type runOutbound struct {
	spec   spec.Outbound
	key    buildKey
	target *plane.Target
	// gate is the carrier sink of its dialer copy (nil: no TCP carriers),
	// counters its QUIC counters (nil: none), press its carrier-pressure
	// sampling while it is a Score leaf (pressure.go).
	gate     *carrierGate
	counters pressure.CounterSource
	press    *runPressure
}

type runBalancer struct {
	spec    spec.Balancer
	key     buildKey
	version uint32
	target  *plane.Target
	bal     *balancer.Balancer
	probing bool
}
