package supervisor

import (
	"slices"

	"switchyard/spec"
)

// inboundPlan is what an apply does to the inbounds. New sockets are bound
// while planning, so an address that cannot be bound refuses the apply
// before anything changed.
type inboundPlan struct {
	swaps   []inboundSwap        // same address, changed settings: new server, same socket
	bound   map[string]*listener // new inbounds and inbounds that moved
	removed []string
	tuns    *tunPlan // the tun inbounds (tuns.go); nil before Start
}

type inboundSwap struct {
	spec spec.Inbound
	srv  server
}

// planInbounds compares ins with the running inbounds. Before Start there is
// nothing to compare: Start binds what the current spec says.
func (sv *Supervisor) planInbounds(ins []spec.Inbound) (*inboundPlan, error) {
	p := &inboundPlan{}
	if !sv.started {
		return p, nil
	}
	all := ins
	ins = listenerInbounds(ins)
	var toBind []spec.Inbound
	seen := map[string]bool{}
	for _, in := range ins {
		seen[in.Tag] = true
		l, ok := sv.inbounds[in.Tag]
		switch {
		case ok && sameInbound(l.spec, in):
		case ok && l.spec.Listen == in.Listen:
			srv, err := newServer(in, sv.conn, sv.log)
			if err != nil {
				p.close()
				return nil, err
			}
			p.swaps = append(p.swaps, inboundSwap{spec: in, srv: srv})
		default:
			toBind = append(toBind, in)
		}
	}
	for tag := range sv.inbounds {
		if !seen[tag] {
			p.removed = append(p.removed, tag)
		}
	}
	slices.Sort(p.removed)
	bound, err := sv.bindAll(toBind)
	if err != nil {
		p.close()
		return nil, err
	}
	p.bound = bound
	if p.tuns, err = sv.planTUNs(all); err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

// close undoes a plan that will not be committed.
func (p *inboundPlan) close() {
	for _, s := range p.swaps {
		s.srv.Close()
	}
	for _, l := range p.bound {
		l.close()
	}
	if p.tuns != nil {
		p.tuns.close()
	}
}

// commitInbounds swaps, rebinds and removes inbounds. The connections of a
// replaced server follow the drain policy: close ends them, keep lets them
// run to their end.
func (sv *Supervisor) commitInbounds(p *inboundPlan, drain spec.Drain) {
	retire := func(s server) {
		if drain == spec.DrainClose {
			s.Close()
			return
		}
		sv.retired = append(sv.retired, s)
	}
	for _, sw := range p.swaps {
		l := sv.inbounds[sw.spec.Tag]
		retire(l.swap(sw.spec, sw.srv))
		sv.log.Info("inbound " + sw.spec.Tag + " changed: new connections get the new settings")
	}
	for tag, l := range p.bound {
		if old, ok := sv.inbounds[tag]; ok {
			old.stop()
			sv.stopped = append(sv.stopped, old)
			retire(old.current())
			sv.log.Info("inbound "+tag+" rebound", "listen", l.addr().String())
		} else {
			sv.log.Info("inbound "+tag+" added", "listen", l.addr().String())
		}
		sv.inbounds[tag] = l
		l.run()
	}
	for _, tag := range p.removed {
		old := sv.inbounds[tag]
		old.stop()
		sv.stopped = append(sv.stopped, old)
		retire(old.current())
		delete(sv.inbounds, tag)
		sv.log.Info("inbound " + tag + " removed")
	}
	if p.tuns != nil {
		sv.commitTUNs(p.tuns)
	}
	sv.publishListening()
	sv.pruneRetired()
}

// pruneRetired forgets retired servers whose last connection has ended.
func (sv *Supervisor) pruneRetired() {
	sv.retired = slices.DeleteFunc(sv.retired, func(s server) bool {
		if l, ok := s.(interface{ Live() int }); ok && l.Live() == 0 {
			s.Close()
			return true
		}
		return false
	})
}
