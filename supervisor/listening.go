package supervisor

import "net"

// publishListening publishes the bound address of every inbound, for
// readers that must not take sv.mu (the API). sv.mu is held.
func (sv *Supervisor) publishListening() {
	m := make(map[string]net.Addr, len(sv.inbounds))
	for tag, l := range sv.inbounds {
		m[tag] = l.addr()
	}
	sv.listening.Store(&m)
}

// Listening is the bound address of the inbound tag as last published (by
// Start and by each reload that moved inbounds), read without a lock; nil
// when no inbound has that tag or none is bound yet.
func (sv *Supervisor) Listening(tag string) net.Addr {
	m := sv.listening.Load()
	if m == nil {
		return nil
	}
	return (*m)[tag]
}
