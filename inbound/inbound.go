// Package inbound defines what the inbounds (socks, http, mixed) are handed:
// a Connector that routes a flow and opens it.
package inbound

import (
	"context"
	"net"

	"switchyard/netx"
)

// Connector routes flows on the current plane and opens them.
type Connector interface {
	// ConnectStream routes f, resolves the target and dials it. The returned
	// conn is tracked and guarded; closing it ends the flow. An error is a
	// failed dial: the inbound answers it with a failure reply. errors.Is
	// (err, outbound.ErrBlocked) means a rule refused the flow.
	ConnectStream(ctx context.Context, f netx.Flow) (net.Conn, error)
	// OpenAssociation returns the link of one UDP association whose packets
	// are routed one by one. f describes the association (inbound, source,
	// user); its Dst is unused. It never fails; closing the link ends the
	// association and every sub-link.
	OpenAssociation(f netx.Flow) netx.PacketLink
}
