package supervisor

import (
	"fmt"

	"net"
	"runtime/debug"
	"switchyard/health"

	"switchyard/spec"
)

// Apply moves the running system to s. Outbounds whose spec is unchanged
// keep running untouched (with whatever connections they hold); changed ones
// are built as a new version and the old version is drained as configured;
// removed ones are drained. Everything new is built first: any construction
// error, or an inbound address that cannot be bound, refuses the whole apply
// and the running state stays exactly as it was. Then one new plane is
// published, drains applied, balancer probes stopped and started, and the
// inbounds updated. The socket policy is fixed for the process's lifetime.
//
// An apply that drops or builds a large rule set returns the memory freed
// to the operating system before it returns: an idle process would not
// collect the old plane for up to two minutes, and then return its pages
// slowly.
func (sv *Supervisor) Apply(s *spec.Spec) error {
	large, err := sv.apply(s)
	sv.countReload(err)
	if large {
		debug.FreeOSMemory()
	}
	return err
}

// releaseRules is the size of a rule set, old or new, from which an apply
// returns freed memory at once.
const releaseRules = 10_000

func (sv *Supervisor) apply(s *spec.Spec) (large bool, err error) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if sv.closed {
		return false, net.ErrClosed
	}
	large = len(s.Rules) >= releaseRules || len(sv.cell.Load().Rules) >= releaseRules
	if !spec.Equal(s.Socket, sv.socket) {
		sv.log.Warn("the [socket] policy applies from the next start; this reload keeps the running one")
	}
	deps, err := sv.deps(s)
	if err != nil {
		return large, sv.refuse(err)
	}
	rt, err := sv.dnsFor(s)
	if err != nil {
		return large, sv.refuse(err)
	}
	dropDNS := func() {
		if rt != sv.dnsRT {
			rt.close()
		}
	}
	deps = rt.withDNS(deps)
	eng := sv.engineFor(s)
	p, err := prepareWith(sv.cur, s, deps, sv.opts.wrap, sv.groupEnv(eng))
	if err != nil {
		dropDNS()
		return large, sv.refuse(err)
	}
	ins, err := sv.planInbounds(s.Inbounds)
	if err != nil {
		p.discard()
		dropDNS()
		return large, sv.refuse(err)
	}
	rt.attach(p.plane)
	if rt != sv.dnsRT {
		sv.dnsPrev.close()
		sv.dnsPrev, sv.dnsRT = sv.dnsRT, rt
		sv.dnsCur.Store(rt)
	}
	sv.admit(p, s)
	sv.reloadMode(s, p.plane)
	sv.commit(p, ins, eng)
	return large, nil
}

func (sv *Supervisor) refuse(err error) error {
	sv.log.Error("reload refused, the running configuration stays: " + err.Error())
	return err
}

// commit publishes the prepared state. Nothing here can fail.
func (sv *Supervisor) commit(p *prepared, ins *inboundPlan, eng *health.Engine) {
	old := sv.cur
	sv.configureUsers(p.next.spec)
	oldEngine := sv.engine.Load()
	if eng != oldEngine {
		sv.engine.Store(eng)
		sv.healthSpec = p.next.spec.Health
	}
	sv.syncHealth(eng, p.next)
	sv.syncMetrics(p.next) // before the plane: its first dials are counted
	sv.publish(old, p)
	eng.SyncActivity(activities(p.next))
	sv.syncWarm(p.next, p.plane)
	sv.syncPressure(old, p.next)
	if eng != oldEngine {
		sv.log.Info("[health] changed: node health starts over")
		oldEngine.Stop()
		if sv.started {
			eng.Start()
		}
	}
	sv.cur = p.next
	for _, st := range p.plan.outbounds {
		id := fmt.Sprintf("%s@v%d", st.spec.Tag, st.version)
		sv.log.Info("outbound "+id+" "+st.kind.String(), "epoch", p.plane.Epoch)
	}
	for _, d := range p.plan.drains {
		t := old.outbounds[d.tag].target
		what := "changed"
		if d.removed {
			what = "removed"
		}
		sv.log.Info(fmt.Sprintf("outbound %s drained (%s, %s)", t.ID(), what, d.policy), "flows", t.Flows())
		if d.policy == spec.DrainClose {
			t.CloseFlows()
		}
		t.Retire()
	}
	for _, st := range p.plan.balancers {
		sv.log.Info(fmt.Sprintf("balancer %s@v%d %s", st.spec.Tag, st.version, st.kind))
		if st.kind == stepBuild {
			if r, ok := old.balancers[st.spec.Tag]; ok {
				r.bal.Stop()
			}
		}
	}
	for _, st := range p.plan.groups {
		sv.log.Info(fmt.Sprintf("group %s@v%d %s", st.spec.Tag, st.version, st.kind))
	}
	for _, tag := range p.plan.removedGroups {
		sv.log.Info(fmt.Sprintf("group %s@v%d removed", tag, old.groupRuns[tag].version))
	}
	if old.groups != nil {
		old.groups.Close()
	}
	for _, tag := range p.plan.removedBalancers {
		sv.log.Info(fmt.Sprintf("balancer %s@v%d removed", tag, old.balancers[tag].version))
		old.balancers[tag].bal.Stop()
	}
	if sv.started {
		sv.startProbes(sv.cur)
		sv.commitInbounds(ins, p.next.spec.Reload.Drain)
	}
}
