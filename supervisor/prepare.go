package supervisor

import (
	"fmt"
	"log/slog"

	"switchyard/balancer"
	"switchyard/netx"
	"switchyard/outbound"
	"switchyard/outbound/build"
	"switchyard/plane"
	"switchyard/route"
	"switchyard/spec"
)

// prepared is everything an apply builds before it publishes: the plan, the
// next state and its plane. Building opens no socket and starts nothing, so a
// refused apply leaves nothing behind.
type prepared struct {
	plan     *thePlan
	next     *state
	plane    *plane.Plane
	warnings []string // the group manager's (also logged by it)
}

// discard releases what a prepared apply that is not committed holds.
func (p *prepared) discard() {
	if p.next.groups != nil {
		p.next.groups.Close()
	}
}

// prepare builds what the plan says must be built and reuses the running
// objects for the rest. Any construction error refuses the whole apply.
func prepare(cur *state, s *spec.Spec, deps outbound.Deps) (*prepared, error) {
	return prepareWith(cur, s, deps, nil, nil)
}

// prepareWith is prepare with a hook that may wrap each built outbound
// (tests give members a probe target this way).
func prepareWith(cur *state, s *spec.Spec, deps outbound.Deps, wrap func(spec.Outbound, outbound.Outbound) outbound.Outbound, env *groupEnv) (*prepared, error) {
	p := plan(cur, s)
	// The state keeps the spec for the next plan and for what is read of
	// it after the apply, but not its rules: only the plane's compiled
	// rules stay, so a large rule set is not held twice.
	kept := *s
	kept.Rules = nil
	next := &state{
		spec:      &kept,
		outbounds: make(map[string]*runOutbound, len(s.Outbounds)),
		balancers: make(map[string]*runBalancer, len(s.Balancers)),
		groupRuns: make(map[string]*runGroup, len(s.Groups)),
		nodeIDs:   nodeIdentities(cur, s),
		built:     p.built,
		versions:  p.versions,
		epoch:     1,
	}
	if cur != nil {
		next.epoch = cur.epoch + 1
	}
	targets := make(map[string]*plane.Target, len(s.Outbounds)+len(s.Balancers))
	for _, st := range p.outbounds {
		if st.kind == stepReuse {
			// The same target, under the new spec: a key outside the build
			// key (drain) takes effect on the running version.
			was := cur.outbounds[st.spec.Tag]
			r := &runOutbound{spec: st.spec, key: st.key, target: was.target, gate: was.gate, counters: was.counters, press: was.press}
			next.outbounds[st.spec.Tag] = r
			targets[st.spec.Tag] = r.target
			continue
		}
		id := plane.OutboundID{Tag: st.spec.Tag, Version: st.version}
		d := deps
		d.Logger = deps.Logger.With("outbound", id.String())
		gate := newCarrierGate(st.spec, &d)
		out, err := build.Outbound(st.spec, d)
		if err != nil {
			return nil, fmt.Errorf("building outbound %s failed: %w", id, err)
		}
		raw := out
		if wrap != nil {
			out = wrap(st.spec, out)
		}
		t := plane.NewTarget(id, out)
		t.SetNode(next.nodeIDs[st.spec.Tag])
		next.outbounds[st.spec.Tag] = &runOutbound{spec: st.spec, key: st.key, target: t, gate: gate, counters: counterSourceOf(out, raw)}
		targets[st.spec.Tag] = t
	}
	for _, st := range p.balancers {
		if st.kind == stepReuse {
			r := cur.balancers[st.spec.Tag]
			next.balancers[st.spec.Tag] = r
			targets[st.spec.Tag] = r.target
			continue
		}
		r, err := buildBalancer(st, next.outbounds, deps.Logger)
		if err != nil {
			return nil, err
		}
		next.balancers[st.spec.Tag] = r
		targets[st.spec.Tag] = r.target
	}
	for _, st := range p.groups {
		next.groupRuns[st.spec.Tag] = &runGroup{spec: st.spec, version: st.version}
	}
	groups, warnings, err := buildGroups(cur, next, p, s, env)
	if err != nil {
		return nil, err
	}
	next.groups = groups
	if groups != nil {
		for _, tag := range groups.Tags() {
			targets[tag] = groups.Target(tag)
		}
	}
	// From here a failure must close the manager just built.
	fail := func(err error) (*prepared, error) {
		if groups != nil {
			groups.Close()
		}
		return nil, err
	}
	pl := &plane.Plane{Epoch: next.epoch, Targets: targets, Establish: netx.EstablishTimeout(s.Dial.ConnectTimeout)}
	if len(s.Rules) > 0 {
		pl.Rules = make([]plane.Rule, 0, len(s.Rules))
	}
	for i, r := range s.Rules {
		m, err := route.Compile(r)
		if err != nil {
			return fail(fmt.Errorf("rule %d: %w", i+1, err))
		}
		t, ok := targets[r.Outbound]
		if !ok {
			return fail(fmt.Errorf("rule %d: unknown outbound %q", i+1, r.Outbound))
		}
		pl.Rules = append(pl.Rules, plane.Rule{Match: m, Target: t})
	}
	final, ok := targets[s.Route.Final]
	if !ok {
		return fail(fmt.Errorf("route: final names unknown outbound %q", s.Route.Final))
	}
	pl.Final = final
	if err := attachModes(pl, s, groups, targets); err != nil {
		return fail(err)
	}
	return &prepared{plan: p, next: next, plane: pl, warnings: warnings}, nil
}

func buildBalancer(st balancerStep, outs map[string]*runOutbound, log *slog.Logger) (*runBalancer, error) {
	b := st.spec
	strategy, err := balancer.ParseStrategy(b.Strategy)
	if err != nil {
		return nil, fmt.Errorf("balancer %s: %w", b.Tag, err)
	}
	members := make([]balancer.Member, 0, len(b.Members))
	for _, m := range b.Members {
		r, ok := outs[m]
		if !ok {
			return nil, fmt.Errorf("balancer %s references unknown outbound %s", b.Tag, m)
		}
		pr, ok := r.target.Outbound().(outbound.Prober)
		if !ok || !pr.ProbeTarget().IsValid() {
			return nil, fmt.Errorf("balancer %s: outbound %s has no upstream a TCP health probe can reach", b.Tag, m)
		}
		members = append(members, balancer.Member{Target: r.target, Probe: pr.ProbeTarget()})
	}
	id := plane.OutboundID{Tag: b.Tag, Version: st.version}
	bal, err := balancer.New(b.Tag, members, strategy, log.With("version", id.Version))
	if err != nil {
		return nil, fmt.Errorf("building balancer %s failed: %w", b.Tag, err)
	}
	return &runBalancer{spec: b, key: st.key, version: st.version, target: plane.NewChooserTarget(id, bal), bal: bal}, nil
}

// dependencies derives what outbounds are built with from the spec.
func dependencies(s *spec.Spec, hook func(netx.SocketInfo) error, resolver netx.Resolver, log *slog.Logger) (outbound.Deps, error) {
	policy, err := netx.NewSocketPolicy(s.Socket.Mark, s.Socket.Interface, s.Socket.BindAddresses, s.Socket.TCPKeepAliveIdle)
	if err != nil {
		return outbound.Deps{}, err
	}
	policy.Hook = hook
	if resolver == nil {
		resolver = netx.SystemResolver{}
	}
	return outbound.Deps{
		Dialer:         netx.NewDialer(policy, s.Dial.ConnectTimeout),
		Servers:        resolver,
		Destinations:   resolver,
		Logger:         log,
		ConnectTimeout: s.Dial.ConnectTimeout,
	}, nil
}
