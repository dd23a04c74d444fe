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

// noUDPProber is noUDP over an outbound with a TCP upstream, which keeps it
// usable as a balancer member.
type noUDPProber struct {
	noUDP
	p outbound.Prober
}

func (n noUDPProber) ProbeTarget() netx.Addr { return n.p.ProbeTarget() }

// refuseUDP wraps out so that it carries no datagrams.
func refuseUDP(out outbound.Outbound, tag string) outbound.Outbound {
	n := noUDP{out, tag}
	if p, ok := out.(outbound.Prober); ok {
		return noUDPProber{n, p}
	}
	return n
}
