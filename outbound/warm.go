package outbound

import (
	"context"
	"time"
)

// WarmKind is what an outbound keeps warm between flows.
type WarmKind uint8

const (
	// WarmNone: nothing reusable (each flow is a connection of its own
	// with its own transport handshake: WebSocket, HTTP upgrade).
	WarmNone WarmKind = iota
	// WarmPool: bare server connections, connected and with TLS completed,
	// any of which a flow's protocol handshake can start on (VLESS,
	// Trojan, VMess, Shadowsocks over plain TCP or TLS).
	WarmPool
	// WarmSession: one session every flow opens its streams on (a QUIC
	// connection, a WireGuard tunnel, gRPC's HTTP/2 connection).
	WarmSession
)

func (k WarmKind) String() string {
	switch k {
	case WarmPool:
		return "pool"
	case WarmSession:
		return "session"
	}
	return "none"
}

// Warmth is a reading of what an outbound keeps warm, for the API and the
// metrics.
type Warmth struct {
	Kind   WarmKind
	Pooled int  // WarmPool: connections waiting in the pool
	Up     bool // WarmSession: the session is established
	// WarmPool: the age past which a pooled connection is not handed
	// out, learned per server, and whether it is still being learned.
	IdleBound time.Duration
	Learning  bool
}

// Warmer is implemented by an outbound that can make what it reuses
// between flows ready before a flow needs it (the warm-up of package
// warm). Its methods may be called concurrently with flows.
type Warmer interface {
	// Warm makes the reusable state ready under ctx, which bounds it. For
	// a pool, keep false deposits one fresh connection left to the pool's
	// idle bound (a seed); keep true has the pool hold one from now on,
	// replaced as it expires, until Cool or Purge. A session is
	// established (keep makes no difference: it stays until it dies or is
	// purged). opened reports whether a connection was established; an
	// outbound of kind WarmNone fails.
	Warm(ctx context.Context, keep bool) (opened bool, err error)
	// Cool lets go of what Warm keeps for future flows: the pooled
	// connections, a session no flow uses. Flows open are never cut.
	Cool()
	// Warmth reads the state; it takes no lock a dial holds.
	Warmth() Warmth
}

// WarmerOf is what warms o: o itself when it is a Warmer, else what a
// wrapper around it (one with Unwrap, such as udp = false's) wraps; nil
// when nothing does.
func WarmerOf(o Outbound) Warmer {
	for o != nil {
		if w, ok := o.(Warmer); ok {
			return w
		}
		u, ok := o.(interface{ Unwrap() Outbound })
		if !ok {
			return nil
		}
		o = u.Unwrap()
	}
	return nil
}
