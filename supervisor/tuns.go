package supervisor

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"switchyard/inbound/tun"
	"switchyard/spec"
)

// The tun inbounds are devices, not listeners: the supervisor keeps them
// apart (sv.tuns, guarded by sv.mu). An apply keeps a tun inbound whose
// spec is unchanged, with its device and every flow; a changed one is
// recreated (its device, its routes: the successor replaces the entries
// its predecessor leaves, so strict_route blocks throughout); a removed one
// is closed, which removes its routes.

// listenerInbounds are the inbounds of ins that listen on a socket.
func listenerInbounds(ins []spec.Inbound) []spec.Inbound {
	return slices.DeleteFunc(slices.Clone(ins), func(in spec.Inbound) bool { return in.TUN != nil })
}

// tunConfig is what the tun inbound of in runs with.
func (sv *Supervisor) tunConfig(in spec.Inbound) (tun.Config, error) {
	t := in.TUN
	cfg := tun.Config{
		Tag: in.Tag, Name: t.Name, Addresses: t.Addresses, MTU: t.MTU, Sniff: in.Sniff,
		DNSHijack: t.DNSHijack, DNS: sv.tunDNS, IsFake: sv.isFake,
		MaxAssociations: in.MaxUDPAssociations, UDPIdle: t.UDPTimeout, MaxHandshakes: in.MaxHandshakes,
		Ping: sv.pinger(in.Tag),
	}
	if t.AutoRoute {
		if sv.socket.Mark == 0 {
			return cfg, fmt.Errorf("tun %s: auto_route needs the process's sockets marked ([socket] mark) from the start: restart to apply it", in.Tag)
		}
		cfg.Route = &tun.Route{Mark: sv.socket.Mark, Include: t.RouteAddress, Exclude: t.RouteExclude, Strict: t.StrictRoute}
	}
	return cfg, nil
}

// tunDNS is the DNS service in force, for hijacked queries.
func (sv *Supervisor) tunDNS() tun.DNS {
	rt := sv.dnsCur.Load()
	if rt == nil {
		return nil
	}
	return rt.svc
}

// isFake reports whether a is a fake IP of the plane in force.
func (sv *Supervisor) isFake(a netip.Addr) bool {
	p := sv.cell.Load()
	return p != nil && p.FakeIPs != nil && p.FakeIPs.Contains(a)
}

// openTUN creates and serves the device of in.
func (sv *Supervisor) openTUN(in spec.Inbound) (*tun.Inbound, error) {
	cfg, err := sv.tunConfig(in)
	if err != nil {
		return nil, err
	}
	return tun.New(cfg, sv.conn, sv.log.With("inbound", in.Tag))
}

// tunRun is one running tun inbound.
type tunRun struct {
	spec spec.Inbound
	in   *tun.Inbound
}

// startTUNs opens every tun inbound of ins; on a failure it closes those it
// opened.
func (sv *Supervisor) startTUNs(ins []spec.Inbound) error {
	for _, in := range ins {
		if in.TUN == nil {
			continue
		}
		t, err := sv.openTUN(in)
		if err != nil {
			sv.closeTUNs()
			return err
		}
		sv.tuns[in.Tag] = &tunRun{spec: in, in: t}
	}
	return nil
}

// closeTUNs closes every tun inbound.
func (sv *Supervisor) closeTUNs() error {
	var errs []error
	for tag, r := range sv.tuns {
		errs = append(errs, r.in.Close())
		delete(sv.tuns, tag)
	}
	return errors.Join(errs...)
}

// tunPlan is what an apply does to the tun inbounds. Planning opens the
// new devices already, so that a device that cannot be created refuses the
// apply; a changed inbound whose device keeps its name is closed first
// (the name is taken until then) and, when its successor cannot be
// opened, opened again as it was.
type tunPlan struct {
	opened  map[string]*tunRun // new and changed inbounds, open
	removed []string
}

// planTUNs compares the tun inbounds of ins with the running ones.
func (sv *Supervisor) planTUNs(ins []spec.Inbound) (*tunPlan, error) {
	p := &tunPlan{opened: map[string]*tunRun{}}
	if !sv.started {
		return p, nil
	}
	seen := map[string]bool{}
	for _, in := range ins {
		if in.TUN == nil {
			continue
		}
		seen[in.Tag] = true
		cur, ok := sv.tuns[in.Tag]
		if ok && spec.Equal(cur.spec, in) {
			continue
		}
		if ok && cur.spec.TUN.Name == in.TUN.Name {
			retire(cur, in)
			delete(sv.tuns, in.Tag)
			t, err := sv.openTUN(in)
			if err != nil {
				if back, rerr := sv.openTUN(cur.spec); rerr == nil {
					sv.tuns[in.Tag] = &tunRun{spec: cur.spec, in: back}
				} else {
					sv.log.Error("tun inbound "+in.Tag+" could not be opened again as it was", "error", rerr)
				}
				p.close()
				return nil, err
			}
			p.opened[in.Tag] = &tunRun{spec: in, in: t}
			continue
		}
		t, err := sv.openTUN(in)
		if err != nil {
			p.close()
			return nil, err
		}
		p.opened[in.Tag] = &tunRun{spec: in, in: t}
	}
	for tag := range sv.tuns {
		if !seen[tag] {
			p.removed = append(p.removed, tag)
		}
	}
	slices.Sort(p.removed)
	return p, nil
}

// retire closes the running inbound old that next replaces. When next
// installs auto_route's entries too, old leaves its own for next to
// replace (tun.Inbound.Handover): with strict_route nothing bypasses the
// device while it is recreated, and a successor that runs already keeps
// the entries it installed.
func retire(old *tunRun, next spec.Inbound) {
	if next.TUN.AutoRoute {
		old.in.Handover()
		return
	}
	old.in.Close()
}

// close undoes a plan that will not be committed.
func (p *tunPlan) close() {
	for _, r := range p.opened {
		r.in.Close()
	}
	p.opened = nil
}

// commitTUNs puts the opened inbounds in place and closes the replaced and
// removed ones.
func (sv *Supervisor) commitTUNs(p *tunPlan) {
	for tag, r := range p.opened {
		if old, ok := sv.tuns[tag]; ok {
			retire(old, r.spec)
			sv.log.Info("inbound " + tag + " changed: device " + r.spec.TUN.Name + " recreated")
		} else {
			sv.log.Info("inbound "+tag+" added", "device", r.spec.TUN.Name)
		}
		sv.tuns[tag] = r
	}
	for _, tag := range p.removed {
		if err := sv.tuns[tag].in.Close(); err != nil {
			sv.log.Warn("inbound "+tag+" removed; removing its routes failed", "error", err)
		} else {
			sv.log.Info("inbound " + tag + " removed")
		}
		delete(sv.tuns, tag)
	}
}

// tunDevice is the device name of the running tun inbound tag, "" when
// there is none.
func (sv *Supervisor) tunDevice(tag string) string {
	if r, ok := sv.tuns[tag]; ok {
		return r.spec.TUN.Name
	}
	return ""
}
