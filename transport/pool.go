package transport

import (
	"context"
	"errors"
	"net"
	"time"

	"switchyard/internal/connpool"
	"switchyard/internal/slot"
	"switchyard/netx"
)

// WarmKind is what a dialer keeps warm between dials.
type WarmKind uint8

const (
	// WarmNone: nothing (WebSocket, HTTP upgrade: each stream is its own
	// connection with its own HTTP handshake).
	WarmNone WarmKind = iota
	// WarmPool: bare server connections, connected and with TLS completed,
	// any of which a flow's protocol handshake can start on (plain TCP;
	// XHTTP's idle HTTP/2 connections).
	WarmPool
	// WarmSession: one shared session flows open streams on (gRPC's
	// HTTP/2 connection).
	WarmSession
)

// Warmth is a reading of what a dialer keeps warm, for the API and the
// metrics; it takes no lock.
type Warmth struct {
	Kind   WarmKind
	Pooled int  // WarmPool: connections waiting in the pool
	Up     bool // WarmSession: the session is established
	// WarmPool: the pool's idle bound, and whether it is still learning it.
	IdleBound time.Duration
	Learning  bool
}

// ErrNothingToWarm is the failure of Warm on a transport that keeps
// nothing between dials.
var ErrNothingToWarm = errors.New("transport: this transport keeps nothing warm between dials")

// newPool is the pool of a plain TCP transport: its dials are the
// transport's connect (resolve, connect, keepalive, TLS), its refreshes
// bounded by the establishment deadline.
//
// The pool's own replacement dials are physical proxied connects like a
// flow's: under the process's dial gate (netx.Dialer.Gate), when there is
// one, they wait for a permit as any dial does.
func newPool(d *Dialer, connect time.Duration) *connpool.Pool {
	timeout := netx.EstablishTimeout(connect)
	cfg := connpool.Config{Dial: d.connect, Refresh: true, Timeout: timeout}
	if g := d.dialer.Gate; g != nil {
		adm := netx.NewAdmission(g, g.Size())
		cfg.Admit = func(ctx context.Context) (context.Context, func()) {
			est, dctx, cancel := netx.Begin(ctx, adm, timeout)
			return dctx, func() { est.End(); cancel() }
		}
	}
	return connpool.New(cfg)
}

// fromPool is a plain TCP transport's Dial: for a flow's dial (one under
// an establishment) a pooled connection when one is ready, else a fresh
// one. A pool hit is no physical connect, but the protocol handshake the
// caller runs on it next is: it takes the dial's admission permit here,
// and marks the dial as a pool hit for health. A dial outside an
// establishment (a health probe, a delay test) always connects afresh: it
// measures the path, and leaves the warm connection to a flow.
func (d *Dialer) fromPool(ctx context.Context) (net.Conn, error) {
	if !netx.Establishing(ctx) {
		return d.connect(ctx)
	}
	c, hit, err := d.pool.Get(ctx)
	if err != nil {
		return nil, err
	}
	if hit {
		if err := netx.Admit(ctx); err != nil {
			c.Close()
			return nil, err
		}
		netx.MarkPooled(ctx)
	}
	return c, nil
}

// Warm makes what the dialer keeps between dials ready before a flow
// needs it, under ctx. With a pool, keep false deposits one fresh
// connection, left to the pool's idle bound (a startup seed); keep true
// has the pool hold one from now on, replacing it as it expires, until
// Cool or Purge (a found-dead one is discarded first). With gRPC it
// establishes the shared HTTP/2 connection. opened reports whether a
// connection was established.
func (d *Dialer) Warm(ctx context.Context, keep bool) (opened bool, err error) {
	switch {
	case d.pool != nil && keep:
		before := d.pool.Stats().Deposited
		err := d.pool.Fill(ctx, 1)
		return d.pool.Stats().Deposited != before, err
	case d.pool != nil:
		c, err := d.connect(ctx)
		if err != nil {
			return false, err
		}
		return d.pool.Put(c), nil
	case d.grpc != nil:
		before := d.grpc.slot.State().Gen
		r, err := d.grpc.slot.Acquire(ctx)
		if err != nil {
			return false, err
		}
		r.Release()
		return r.Gen != before, nil
	case d.xhttp != nil && !d.xhttp.cfg.h1:
		return d.xhttp.warm(ctx)
	}
	return false, ErrNothingToWarm
}

// Cool lets go of what Warm keeps: the pooled connections (and the
// pool's level), or the shared HTTP/2 connection when no stream is open on
// it. Nothing a flow holds is cut; the next flow connects afresh.
func (d *Dialer) Cool() {
	if d.pool != nil {
		d.pool.Purge()
	}
	if d.grpc != nil && d.grpc.slot.State().Holds == 0 {
		d.grpc.purge()
	}
	if d.xhttp != nil {
		d.xhttp.purge()
	}
}

// Warmth reads what the dialer keeps warm now.
func (d *Dialer) Warmth() Warmth {
	switch {
	case d.pool != nil:
		st := d.pool.Stats()
		return Warmth{Kind: WarmPool, Pooled: st.Idle, IdleBound: st.IdleBound, Learning: st.Learning}
	case d.grpc != nil:
		return Warmth{Kind: WarmSession, Up: d.grpc.slot.State().Phase == slot.Up}
	case d.xhttp != nil && !d.xhttp.cfg.h1:
		// Idle XHTTP connections are a pool: a flow takes one and starts
		// its requests on it.
		return Warmth{Kind: WarmPool, Pooled: d.xhttp.idleCount(), IdleBound: xhttpIdle}
	}
	return Warmth{}
}

// PoolStats reads the pool's counts (ok false without a pool).
func (d *Dialer) PoolStats() (st connpool.Stats, ok bool) {
	if d.pool == nil {
		return connpool.Stats{}, false
	}
	return d.pool.Stats(), true
}
