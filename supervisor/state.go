package supervisor

import (
	"switchyard/balancer"
	"switchyard/plane"
	"switchyard/spec"
)

// state is what runs: the spec it came from (without its rules, which the
// plane holds compiled), each outbound's running version, each balancer,
// and the version counters of every tag ever seen.
type state struct {
	spec             *spec.Spec
	outbounds        map[string]*runOutbound
	balancers        map[string]*runBalancer
	versions         map[string]uint32
	balancerVersions map[string]uint32
	epoch            uint64
}

// runOutbound is a running outbound version: the spec of the last apply
// that kept it (whose drain key its flows get when it is drained), the build
// key it was built from, and its target.
type runOutbound struct {
	spec   spec.Outbound
	key    outboundKey
	target *plane.Target
}

type runBalancer struct {
	spec    spec.Balancer
	key     balancerKey
	version uint32
	target  *plane.Target
	bal     *balancer.Balancer
	probing bool
}
