package build

import (
	"context"
	"io"

	"switchyard/netx"
	"switchyard/outbound"
)

// noUDP refuses datagrams on an outbound configured with udp = false.
type noUDP struct {
	outbound.Outbound
	tag string
}

func (n noUDP) DialPacket(context.Context, netx.Flow) (netx.PacketLink, error) {
	return nil, &outbound.NoUDPError{What: "outbound " + n.tag + " (udp = false)"}
}

// CarriesUDP reports false: udp = false refuses every datagram link
// (outbound.Networks).
func (noUDP) CarriesUDP() bool { return false }

// Close releases what the wrapped outbound holds, if anything.
func (n noUDP) Close() error {
	if c, ok := n.Outbound.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// Unwrap is the wrapped outbound, for what it keeps warm
// (outbound.WarmerOf).
func (n noUDP) Unwrap() outbound.Outbound { return n.Outbound }

// ServerFamily is the wrapped outbound's, when it reports one: the address
// family of its connection to its server, for the health probes. ok is
// false when it does not tell.
func (n noUDP) ServerFamily() (f netx.Family, ok bool) {
	if r, is := n.Outbound.(interface{ ServerFamily() (netx.Family, bool) }); is {
		return r.ServerFamily()
	}
	return netx.V4, false
}

// noUDPProber is noUDP over an outbound with a TCP upstream, which keeps it
// usable as a balancer member.
type noUDPProber struct {
	noUDP
	p outbound.Prober
}

func (n noUDPProber) ProbeTarget() netx.Addr { return n.p.ProbeTarget() }

// noUDPPurger and noUDPProberPurger are the wrappers of an outbound that
// keeps connections for reuse: Purge passes on (outbound.Purger).
type (
	noUDPPurger       struct{ noUDP }
	noUDPProberPurger struct{ noUDPProber }
)

func (n noUDPPurger) Purge()       { n.Outbound.(outbound.Purger).Purge() }
func (n noUDPProberPurger) Purge() { n.Outbound.(outbound.Purger).Purge() }

// refuseUDP wraps out so that it carries no datagrams. The wrapper has what
// of Prober and Purger out has.
func refuseUDP(out outbound.Outbound, tag string) outbound.Outbound {
	n := noUDP{out, tag}
	_, purges := out.(outbound.Purger)
	if p, ok := out.(outbound.Prober); ok {
		if purges {
			return noUDPProberPurger{noUDPProber{n, p}}
		}
		return noUDPProber{n, p}
	}
	if purges {
		return noUDPPurger{n}
	}
	return n
}
