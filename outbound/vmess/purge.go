package vmess

import "switchyard/outbound"

var _ outbound.Purger = (*Outbound)(nil)

// Purge lets go of the connection the outbound's transport shares between
// flows (gRPC's HTTP/2 connection), so that the next flow connects afresh
// (outbound.Purger). Streams open on it are not cut: it closes once the
// last of them ends. Over another transport nothing is shared and Purge
// does nothing.
func (o *Outbound) Purge() { o.dialer.Purge() }
