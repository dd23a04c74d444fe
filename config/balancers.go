package config

import (
	"fmt"
	"slices"
	"strings"

	"switchyard/spec"
)

// balancers lowers [[balancers]]. Outbound tags must already be recorded;
// balancer tags are recorded here, before rules and [route] are checked
// against them. The messages are the documented balancer validation texts,
// word for word, so an empty tag reads "balancer : ...".
func (l *lowerer) balancers(fs []fileBalancer) []spec.Balancer {
	var out []spec.Balancer
	for i := range fs {
		f := &fs[i]
		key := fmt.Sprintf("balancers[%d]", i)
		b := spec.Balancer{
			Strategy:      defaultBalancerStrategy,
			ProbeInterval: defaultProbeInterval,
			ProbeTimeout:  defaultProbeTimeout,
		}

		// Tags of outbounds and balancers share one namespace.
		switch {
		case f.Tag == nil:
			l.errorf(key+".tag", "required key is missing")
		case *f.Tag == "":
			l.errorf(key+".tag", "balancer : a balancer tag must not be empty")
		default:
			b.Tag = *f.Tag
			_, isOutbound := l.outboundType(b.Tag)
			_, isBalancer := l.balancerTags[b.Tag]
			if isOutbound || isBalancer {
				l.errorf(key+".tag", "duplicate balancer tag %s", b.Tag)
			} else {
				l.reservedTag(key+".tag", b.Tag)
				l.balancerTags[b.Tag] = key + ".tag"
			}
		}

		if len(f.Members) == 0 {
			l.errorf(key+".members", "balancer %s has no members", b.Tag)
		}
		eachString(key+".members", f.Members, func(ekey, m string) {
			l.member(ekey, b.Tag, m)
			b.Members = append(b.Members, m)
		})

		if f.Strategy != nil {
			if slices.Contains(strategies, *f.Strategy) {
				b.Strategy = *f.Strategy
			} else {
				l.errorf(key+".strategy", "balancer %s: unknown balancer strategy %q (expected %s)", b.Tag, *f.Strategy, quotedAlternatives(strategies))
			}
		}
		if f.ProbeInterval != nil {
			b.ProbeInterval = l.positiveDuration(key+".probe_interval", *f.ProbeInterval, "")
		}
		if f.ProbeTimeout != nil {
			b.ProbeTimeout = l.positiveDuration(key+".probe_timeout", *f.ProbeTimeout, "")
		}
		out = append(out, b)
	}
	return out
}

// member checks one member of the balancer tagged tag: it must be an
// outbound (a balancer is not one) with an upstream a TCP probe can reach.
// An outbound whose type was refused has its problem reported already.
func (l *lowerer) member(key, tag, m string) {
	typ, known := l.outboundType(m)
	switch {
	case !known:
		l.errorf(key, "balancer %s references unknown outbound %s", tag, m)
	case typ != "" && !slices.Contains(probeableTypes, typ), l.noTCPProbe[m]:
		l.errorf(key, "balancer %s: outbound %s has no upstream a TCP health probe can reach", tag, m)
	}
}

// quotedAlternatives writes vs as `"a" or "b"`.
func quotedAlternatives(vs []string) string {
	q := make([]string, len(vs))
	for i, v := range vs {
		q[i] = fmt.Sprintf("%q", v)
	}
	return strings.Join(q, " or ")
}
