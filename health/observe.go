package health

import (
	"time"

	"switchyard/netx"
)

// Observer hears what the engine measures and decides, for metrics: every
// transition of a node state and every probe of a node's path. Its methods
// are called with no engine lock held, on the goroutine of the probe or
// report that caused them; they must be cheap and must not block.
type Observer interface {
	// Transition: state (d, f) of the node id (display name) became alive
	// (it was dead) or dead (it was alive).
	Transition(id NodeID, name string, d Domain, f netx.Family, alive bool)
	// Probed: one probe of the node measured rtt over family f (err nil),
	// or failed (err set; f the family the failure names). A TCP probe
	// reports d = TCP, a UDP probe (one DNS query) d = DNSUDP.
	Probed(id NodeID, name string, d Domain, f netx.Family, rtt time.Duration, err error)
}

// probed reports one probe of n to the observer.
func (e *Engine) probed(n *node, p path, res Result, err error) {
	if e.obs == nil {
		return
	}
	d := TCP
	if p != tcpPath {
		d = DNSUDP
	}
	if err != nil {
		e.obs.Probed(n.id, n.name(), d, familyOf(err), 0, err)
		return
	}
	e.obs.Probed(n.id, n.name(), d, res.Family&1, rtt(res), nil)
}
