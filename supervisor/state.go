package supervisor

import (
	"switchyard/balancer"
	"switchyard/plane"
	"switchyard/spec"
)

// state is what runs: the spec it came from, each outbound's running version,
// each balancer, and the version counters of every tag ever seen.
type state struct {
	spec             *spec.Spec
	outbounds        map[string]*runOutbound
	balancers        map[string]*runBalancer
	versions         map[string]uint32
	balancerVersions map[string]uint32
	epoch            uint64
}

type runOutbound struct {
	spec   spec.Outbound
	target *plane.Target
}

type runBalancer struct {
	spec    spec.Balancer
	version uint32
	target  *plane.Target
	bal     *balancer.Balancer
	probing bool
}
