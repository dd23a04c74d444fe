package supervisor

import "switchyard/inbound/tun"

// pinger is the echo relay of the tun inbound tag: nil until one is built,
// so every echo request is answered unreachable (never as if the
// destination replied).
func (sv *Supervisor) pinger(string) tun.Pinger { return nil }
