package slot

import "time"

// Policy is a slot's backoff after failures.
type Policy struct {
	// Base doubled per consecutive failure, capped at Max, is the wait
	// before the next establishment: with the defaults 2, 4, 8, 16, then
	// 30 s.
	Base, Max time.Duration
	// MinHealthy: a resource that dies sooner after coming up counts as a
	// failed establishment; one that ran longer clears the count.
	MinHealthy time.Duration
	// IgnoreDeaths: a death never counts, whatever the lifetime; only
	// failed establishments do. For a resource whose establishment itself
	// proves the server answers at the moment of use (an HTTP/2 connection
	// over TCP, whose settings exchange is the handshake), where the next
	// establishment tells at once whether the server is back. A WireGuard
	// tunnel starts without a handshake and a QUIC path may die right after
	// its handshake (UDP blocked past it): there a young death is the
	// failure signal.
	IgnoreDeaths bool
}

// DefaultPolicy is the backoff every slot runs unless told otherwise.
var DefaultPolicy = Policy{Base: time.Second, Max: 30 * time.Second, MinHealthy: 10 * time.Second}

func (p Policy) withDefaults() Policy {
	if p.Base <= 0 {
		p.Base = DefaultPolicy.Base
	}
	if p.Max <= 0 {
		p.Max = DefaultPolicy.Max
	}
	if p.MinHealthy <= 0 {
		p.MinHealthy = DefaultPolicy.MinHealthy
	}
	return p
}

// Wait is the wait after the n-th consecutive failure (n >= 1): Base
// doubled n times, capped at Max.
func (p Policy) Wait(n int) time.Duration {
	p = p.withDefaults()
	d := p.Base
	for i := 0; i < n && d < p.Max; i++ {
		d *= 2
	}
	return min(d, p.Max)
}
