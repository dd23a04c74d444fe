package supervisor

// Carrier-pressure hints (internal/pressure) for the runtimes of Score
// leaves. Every proxy runtime with TCP carriers is built with its own
// dialer copy whose Carriers is the runtime's carrierGate; the gate keeps
// nothing until the runtime is a Score leaf. At each publication
// syncPressure arms the runtimes some Score group can select — a
// TCPCarriers set behind the gate, or the outbound's own QUIC counters
// (Hysteria 2), each carrier with its Monitor, registered with the
// supervisor's one Beat — and disarms the others: a non-Score runtime
// samples nothing and keeps no socket. A published hint reaches the Score
// engine's Pressure for the networks that carrier carries only: a
// Shadowsocks or SOCKS runtime's TCP carrier says nothing of its native
// UDP, while a Trojan, VLESS or VMess stream and a Hysteria 2 connection
// carry both. A reload fences every kept Monitor; a replaced or disarmed
// runtime's registrations are removed, its Monitors dropped.

import (
	"net"
	"sync/atomic"
	"time"

	"switchyard/health"
	"switchyard/internal/pressure"
	"switchyard/netx"
	"switchyard/outbound"
	"switchyard/spec"
)

// pressureFeed is what a hint tells the Score engine (*score.Engine).
type pressureFeed interface {
	Pressure(node health.NodeID, network netx.Network, at time.Time)
}

// carrierGate is a proxy runtime's netx.CarrierSink: it hands each socket
// to the runtime's TCPCarriers while the runtime is armed, and drops the
// reference at once otherwise.
type carrierGate struct {
	set atomic.Pointer[pressure.TCPCarriers]
}

func (g *carrierGate) AddCarrier(c *net.TCPConn) {
	if s := g.set.Load(); s != nil {
		s.AddCarrier(c)
	}
}

// tcpCarrierNets are the networks the TCP carriers of a proxy type carry:
// nil for a type without TCP carriers to the proxy. udp is whether the
// runtime carries UDP at all.
func tcpCarrierNets(typ string, udp bool) []netx.Network {
	switch typ {
	case "trojan", "vless", "vmess":
		if udp {
			return []netx.Network{netx.TCP, netx.UDP} // datagrams ride the stream
		}
		return []netx.Network{netx.TCP}
	case "socks", "http", "shadowsocks":
		return []netx.Network{netx.TCP} // UDP, when carried, is native
	}
	return nil
}

// newCarrierGate is the gate of a runtime of o, nil for a type without
// TCP carriers; with it, deps' dialer is the runtime's own copy naming it.
func newCarrierGate(o spec.Outbound, deps *outbound.Deps) *carrierGate {
	if deps.Dialer == nil || tcpCarrierNets(o.Type, true) == nil {
		return nil
	}
	g := &carrierGate{}
	d := *deps.Dialer
	d.Carriers = g
	deps.Dialer = &d
	return g
}

// counterSourceOf is the runtime's QUIC counters: the outbound's own when
// it reads them (Hysteria 2), looked for through a wrapper first.
func counterSourceOf(outs ...outbound.Outbound) pressure.CounterSource {
	for _, o := range outs {
		if s, ok := o.(pressure.CounterSource); ok {
			return s
		}
	}
	return nil
}

// runPressure is an armed runtime's carrier-pressure state: one Monitor
// per carrier, each registered with the Beat.
type runPressure struct {
	node     atomic.Pointer[health.NodeID] // the runtime's node in the published state
	carriers []*pressureCarrier
}

type pressureCarrier struct {
	sampler pressure.Sampler
	mon     *pressure.Monitor
	nets    []netx.Network
	remove  func()
}

// disarm ends every registration of r.
func (r *runPressure) disarm() {
	for _, c := range r.carriers {
		c.remove()
	}
}

// syncPressure arms the runtimes of next's Score leaves and disarms the
// rest (next's and old's not kept), fencing the Monitors it keeps. Called
// under mu after next is published.
func (sv *Supervisor) syncPressure(old, next *state) {
	if sv.score == nil {
		return
	}
	leaves := map[health.NodeID]bool{}
	for _, id := range scoreLeaves(next) {
		leaves[id] = true
	}
	now := sv.scoreClock().Now()
	kept := map[*runPressure]bool{}
	for tag, r := range next.outbounds {
		id := next.nodeIDs[tag]
		if !leaves[id] || (r.gate == nil && r.counters == nil) {
			continue
		}
		if r.press == nil {
			r.press = sv.arm(r)
		} else {
			for _, c := range r.press.carriers {
				c.mon.Fence(now)
			}
		}
		if r.press == nil {
			continue
		}
		r.press.node.Store(&id)
		kept[r.press] = true
	}
	for _, st := range []*state{old, next} {
		if st == nil {
			continue
		}
		for _, r := range st.outbounds {
			if r.press != nil && !kept[r.press] {
				r.press.disarm()
				if r.gate != nil {
					r.gate.set.Store(nil)
				}
				r.press = nil
			}
		}
	}
}

// arm starts r's carrier-pressure sampling: nil when the Beat refuses it.
func (sv *Supervisor) arm(r *runOutbound) *runPressure {
	if sv.beat == nil {
		period := sv.opts.beatPeriod
		sv.beat = pressure.StartBeat(period)
	}
	udp := outbound.CarriesUDP(r.target.Outbound())
	p := &runPressure{}
	add := func(s pressure.Sampler, nets []netx.Network) bool {
		c := &pressureCarrier{sampler: s, mon: &pressure.Monitor{}, nets: nets}
		remove, err := sv.beat.Add(s, c.mon, func(h pressure.Hint) { sv.hint(p, c, h) })
		if err != nil {
			sv.log.Warn("carrier-pressure sampling refused: " + err.Error())
			return false
		}
		c.remove = remove
		p.carriers = append(p.carriers, c)
		return true
	}
	if r.gate != nil {
		set := pressure.NewTCPCarriers(0)
		if add(set, tcpCarrierNets(r.spec.Type, udp)) {
			r.gate.set.Store(set)
		}
	}
	if r.counters != nil {
		nets := []netx.Network{netx.TCP}
		if udp {
			nets = append(nets, netx.UDP)
		}
		add(pressure.NewSource(r.counters), nets)
	}
	if len(p.carriers) == 0 {
		return nil
	}
	return p
}

// hint forwards one published hint of carrier c of p to the Score engine,
// for the networks c carries.
func (sv *Supervisor) hint(p *runPressure, c *pressureCarrier, h pressure.Hint) {
	id := p.node.Load()
	if id == nil {
		return
	}
	var feed pressureFeed = sv.score
	if sv.opts.pressureFeed != nil {
		feed = sv.opts.pressureFeed
	}
	for _, n := range c.nets {
		feed.Pressure(*id, n, h.At)
	}
}

// closePressure stops the Beat; called by Close under mu.
func (sv *Supervisor) closePressure() {
	if sv.beat != nil {
		sv.beat.Close()
	}
}
