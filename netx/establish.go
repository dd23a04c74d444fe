package netx

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// The establishment deadline of a dial is max(MinEstablishTimeout,
// EstablishFactor × connect_timeout): one absolute bound over resolving the
// proxy server, waiting for admission, the TCP connect, the transport's
// handshake (TLS, WebSocket, HTTP upgrade, HTTP/2, QUIC) and the protocol's.
// The spec gives the same bound for transport preparation; four connect
// timeouts leave room for a connect that fails over to a second address and
// two handshake round trips on a slow path.
const (
	MinEstablishTimeout = 10 * time.Second
	EstablishFactor     = 4
)

// EstablishTimeout is the establishment deadline for a connect timeout
// (0: DefaultConnectTimeout).
func EstablishTimeout(connect time.Duration) time.Duration {
	if connect <= 0 {
		connect = DefaultConnectTimeout
	}
	return max(MinEstablishTimeout, EstablishFactor*connect)
}

// Phase is the step of an establishment that is running.
type Phase uint32

// The phases of an establishment, in the order a proxied dial runs them.
const (
	PhaseRouting   Phase = iota // before the outbound started
	PhaseResolve                // resolving the server (or destination)
	PhaseAdmission              // waiting for dial admission
	PhaseConnect                // the TCP connect
	PhaseTLS                    // the TLS handshake
	PhaseTransport              // the transport's handshake (WebSocket, HTTP upgrade, HTTP/2)
	PhaseQUIC                   // the QUIC handshake and authentication
	PhaseTunnel                 // bringing a tunnel up
	PhaseHandshake              // the proxy protocol's handshake
)

var phaseNames = [...]string{
	PhaseRouting:   "routing",
	PhaseResolve:   "resolving",
	PhaseAdmission: "waiting for dial admission",
	PhaseConnect:   "connecting",
	PhaseTLS:       "tls handshake",
	PhaseTransport: "transport handshake",
	PhaseQUIC:      "quic handshake",
	PhaseTunnel:    "tunnel start",
	PhaseHandshake: "protocol handshake",
}

func (p Phase) String() string {
	if int(p) < len(phaseNames) {
		return phaseNames[p]
	}
	return fmt.Sprintf("phase %d", uint32(p))
}

// DeadlineError is the cause of an establishment that ran out of time. It
// matches context.DeadlineExceeded and is a net.Error timeout.
type DeadlineError struct{ After time.Duration }

func (e *DeadlineError) Error() string {
	return fmt.Sprintf("establishment deadline (%s) expired", e.After)
}
func (e *DeadlineError) Is(target error) bool { return target == context.DeadlineExceeded }
func (e *DeadlineError) Timeout() bool        { return true }
func (e *DeadlineError) Temporary() bool      { return true }

// Establishment is one dial's way from routing to a ready flow: its
// absolute deadline, the admission permit it holds from its first physical
// connect until it ends, and the phase running. The layers a dial passes
// through find it in the dial's context (Mark, Admit). It is used by one
// dial; Phase may be read from any goroutine.
type Establishment struct {
	adm   *Admission // nil: admitted without a bound
	at    time.Time  // the deadline
	cause DeadlineError
	phase atomic.Uint32
	held  atomic.Bool // a permit of adm is held
	// pooled: the dial running took a ready connection from a pool (no
	// connect, no TLS); TakePooled reads and clears it for each dial.
	pooled atomic.Bool
}

type establishmentKey struct{}

// estCtx carries an establishment: one value node that needs no key
// allocation.
type estCtx struct {
	context.Context
	e *Establishment
}

func (c *estCtx) Value(key any) any {
	if key == (establishmentKey{}) {
		return c.e
	}
	return c.Context.Value(key)
}

// Begin starts an establishment under adm (nil: no admission bound) with
// the deadline d, and returns the context its dial runs under. The caller
// calls End once the dial returned, whatever its outcome; cancel releases
// the context's timer.
func Begin(parent context.Context, adm *Admission, d time.Duration) (*Establishment, context.Context, context.CancelFunc) {
	e := &Establishment{adm: adm, at: time.Now().Add(d), cause: DeadlineError{After: d}}
	ctx, cancel := context.WithDeadlineCause(parent, e.at, &e.cause)
	return e, &estCtx{Context: ctx, e: e}, cancel
}

// End releases the admission permit, if one is held.
func (e *Establishment) End() {
	if e.held.CompareAndSwap(true, false) {
		e.adm.Release()
	}
}

// MarkPooled records that the dial ctx runs under took a ready pooled
// connection instead of connecting: health keeps such a dial's latency out
// of its dial-latency average (it made no round trip). Nothing outside an
// establishment.
func MarkPooled(ctx context.Context) {
	if e := establishmentOf(ctx); e != nil {
		e.pooled.Store(true)
	}
}

// Establishing reports whether ctx runs under an establishment: a flow's
// dial (or a warm-up's), not a probe's.
func Establishing(ctx context.Context) bool { return establishmentOf(ctx) != nil }

// TakePooled reports whether the dial since the last TakePooled took a
// pooled connection (MarkPooled), and clears the mark for the next dial of
// the establishment (a retry on another member).
func (e *Establishment) TakePooled() bool { return e.pooled.Swap(false) }

// Phase is the phase running, or the one that was when the dial ended.
func (e *Establishment) Phase() Phase { return Phase(e.phase.Load()) }

// Deadline is the establishment's bound.
func (e *Establishment) Deadline() time.Duration { return e.cause.After }

// Expired reports whether ctx, a context returned by Begin, ended because
// the deadline passed, or the deadline passed (a socket carrying it may
// fire just before the context's own timer).
func (e *Establishment) Expired(ctx context.Context) bool {
	return context.Cause(ctx) == error(&e.cause) || !time.Now().Before(e.at)
}

// establishmentOf returns the establishment ctx runs under, or nil.
func establishmentOf(ctx context.Context) *Establishment {
	e, _ := ctx.Value(establishmentKey{}).(*Establishment)
	return e
}

// Mark records that the establishment ctx runs under entered phase p. It
// does nothing outside an establishment.
func Mark(ctx context.Context, p Phase) {
	if e := establishmentOf(ctx); e != nil {
		e.phase.Store(uint32(p))
	}
}

// Admit takes the dial admission permit of the establishment ctx runs
// under, once: a physical connect or a protocol handshake that needs a new
// carrier calls it first. A dial that already holds its permit, a stream on
// a carrier already up (which never calls it) and a dial outside an
// establishment pass at once. The wait counts inside the deadline; a wait
// that ends without the permit fails with FaultLocalRefusal (the error still
// matches the context's cause).
func Admit(ctx context.Context) error {
	e := establishmentOf(ctx)
	if e == nil || e.adm == nil || e.held.Load() {
		return nil
	}
	prev := e.Phase()
	e.phase.Store(uint32(PhaseAdmission))
	if err := e.adm.Acquire(ctx); err != nil {
		// The dial ended waiting for its permit: this process's capacity
		// refused it, not the upstream (Score keeps it neutral).
		return WithFault(err, FaultLocalRefusal)
	}
	e.held.Store(true)
	e.phase.Store(uint32(prev))
	return nil
}
