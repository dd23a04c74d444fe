package vmess

import (
	"context"

	"switchyard/outbound"
	"switchyard/outbound/internal/proxyconn"
)

var _ outbound.Warmer = (*Outbound)(nil)

// Warm readies what the transport keeps between flows: over plain TCP or
// TLS a pooled server connection, over gRPC the HTTP/2 connection
// (outbound.Warmer).
func (o *Outbound) Warm(ctx context.Context, keep bool) (bool, error) {
	return o.dialer.Warm(ctx, keep)
}

// Cool lets go of what Warm keeps; open flows are not cut.
func (o *Outbound) Cool() { o.dialer.Cool() }

// Warmth reads what the transport keeps warm.
func (o *Outbound) Warmth() outbound.Warmth { return proxyconn.Warmth(o.dialer.Warmth()) }
