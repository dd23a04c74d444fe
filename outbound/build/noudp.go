package build

import (
	"context"

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
