package balancer

import (
	"context"
	"time"

	"switchyard/netx"
)

const (
	// DefaultProbeInterval is the sleep between two probes of one member.
	DefaultProbeInterval = 30 * time.Second
	// DefaultProbeTimeout bounds one probe, resolution and every connect
	// attempt included.
	DefaultProbeTimeout = 5 * time.Second
)

// StartProbes starts one goroutine per member that probes the member's
// upstream at once and then every interval, and records the result with
// SetHealthy. A probe resolves the upstream with resolver and connects with
// dialer, so its sockets are under the dialer's socket policy; it is up if any
// address accepts a TCP connection, which is closed at once. timeout bounds a
// whole probe; a resolution error, no address or the timeout count as down.
// An interval or timeout of zero or less takes the default.
//
// Cancelling ctx or calling Stop abandons a probe in flight and ends every
// goroutine. Calling StartProbes again first stops the probes it started
// before. resolver and dialer must not be nil.
func (b *Balancer) StartProbes(ctx context.Context, interval, timeout time.Duration, resolver netx.Resolver, dialer *netx.Dialer) {
	if resolver == nil || dialer == nil {
		panic("balancer: StartProbes needs a resolver and a dialer")
	}
	if interval <= 0 {
		interval = DefaultProbeInterval
	}
	if timeout <= 0 {
		timeout = DefaultProbeTimeout
	}
	b.ctl.Lock()
	defer b.ctl.Unlock()
	b.stopLocked()
	ctx, b.cancel = context.WithCancel(ctx)
	for i := range b.members {
		b.probes.Go(func() { b.probeLoop(ctx, i, interval, timeout, resolver, dialer) })
	}
}

// Stop ends the probes and waits for their goroutines. Health learned so far
// is kept. Stop is idempotent.
func (b *Balancer) Stop() {
	b.ctl.Lock()
	defer b.ctl.Unlock()
	b.stopLocked()
}

func (b *Balancer) stopLocked() {
	if b.cancel != nil {
		b.cancel()
		b.cancel = nil
	}
	b.probes.Wait()
}

func (b *Balancer) probeLoop(ctx context.Context, i int, interval, timeout time.Duration, r netx.Resolver, d *netx.Dialer) {
	sleep := time.NewTimer(interval)
	defer sleep.Stop()
	for {
		up := probe(ctx, b.members[i].Probe, timeout, r, d)
		if ctx.Err() != nil {
			return // abandoned: a cancelled probe says nothing about the upstream
		}
		b.SetHealthy(i, up)
		sleep.Reset(interval)
		select {
		case <-ctx.Done():
			return
		case <-sleep.C:
		}
	}
}

// probe reports whether any address of dst accepts a TCP connection within
// timeout. It uses neither the member's transport nor its credentials: it
// answers only whether the upstream is reachable.
func probe(ctx context.Context, dst netx.Addr, timeout time.Duration, r netx.Resolver, d *netx.Dialer) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	addrs, err := netx.Resolve(ctx, dst, netx.Auto, r)
	if err != nil {
		return false
	}
	for _, a := range addrs {
		c, err := d.Connect(ctx, a)
		if err == nil {
			c.Close()
			return true
		}
		if ctx.Err() != nil {
			return false
		}
	}
	return false
}
