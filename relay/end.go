package relay

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
)

// Cause is what ended a relayed flow first.
type Cause uint8

const (
	// EndClient: the client's side (Pipe's a) ended first, by its end of
	// stream or an error reading or writing it.
	EndClient Cause = iota + 1
	// EndUpstream: the upstream's side (Pipe's b) ended first.
	EndUpstream
	// EndIdle: no byte moved either way for the idle time.
	EndIdle
	// EndStop: the flow's owner stopped it: Pipe's context was done, or a
	// conn was closed beneath the relay (an error matching net.ErrClosed:
	// the flow killed or interrupted through the tracker, its outbound
	// version drained).
	EndStop
)

func (c Cause) String() string {
	switch c {
	case EndClient:
		return "client"
	case EndUpstream:
		return "upstream"
	case EndIdle:
		return "idle"
	case EndStop:
		return "stop"
	}
	return "unknown"
}

// End is how a relayed flow ended: what ended it first, the error that
// did (nil for an end of stream), and whether that counts as a failure of
// the upstream for its health.
//
// The relay goes by the first error either direction met; only when
// neither met one is the flow's end the first end of stream. An error that
// follows the relay's own close of both conns (once one direction ended
// the flow) is a consequence and never the end. Classify says which ends
// are failures.
type End struct {
	By      Cause
	Err     error
	Failure bool
}

// ErrIdle ends a direction when the flow moved nothing either way for a
// whole idle window; it is End.Err of a flow that ended idle.
var ErrIdle = errors.New("relay: idle timeout")

// EndObserver is implemented by an upstream conn that wants to hear how its
// flow ended. Pipe finds it on b or beneath b's wrappers (following
// NetConn, as netx.Observed wrappers offer it), and calls FlowEnded once,
// after both conns are closed and before Pipe returns. The tracker's conn
// implements it (track.Conn), forwarding to the hook it was made with.
//
// End is defined here, where it is produced, and the tracker imports this
// package for it: the relay knows nothing of the tracker (it reaches
// wrappers through netx's interfaces), so the imports point one way, from
// the flow table to the mover.
type EndObserver interface {
	FlowEnded(End)
}

// Classify says how a flow that by ended with err ended:
//
//   - an end of stream (err nil), an idle timeout and an owner's stop are
//     no failure; nor is an error matching net.ErrClosed on either side,
//     which is a local close of the conn by its owner: By becomes EndStop;
//   - on the client's side, a reset, an abort, a broken pipe, a
//     disconnected socket (ENOTCONN), an end of stream where more was due
//     (io.EOF, io.ErrUnexpectedEOF), a socket timeout (ETIMEDOUT, an
//     expired deadline) or a host or network unreachable error is neutral:
//     the client went away. Any other client-side error is unclassified
//     and, as every unclassified failure, counts as a failure;
//   - on the upstream's side, every error is a failure: the same socket
//     errors, protocol errors, anything else.
func Classify(by Cause, err error) End {
	e := End{By: by, Err: err}
	switch {
	case err == nil, by == EndIdle, by == EndStop:
	case errors.Is(err, net.ErrClosed):
		e.By = EndStop
	case by == EndClient:
		e.Failure = !clientGone(err)
	default:
		e.Failure = true
	}
	return e
}

// clientGone reports whether err is one of the errors by which a client's
// side of a flow ends without the upstream being at fault.
func clientGone(err error) bool {
	switch {
	case errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.ECONNABORTED),
		errors.Is(err, syscall.EPIPE),
		errors.Is(err, syscall.ENOTCONN),
		errors.Is(err, syscall.ETIMEDOUT),
		errors.Is(err, syscall.EHOSTUNREACH),
		errors.Is(err, syscall.ENETUNREACH),
		errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, io.EOF),
		errors.Is(err, os.ErrDeadlineExceeded):
		return true
	}
	return false
}

// observer is the EndObserver on c or beneath its wrappers, or nil.
func observer(c net.Conn) EndObserver {
	for c != nil {
		if o, ok := c.(EndObserver); ok {
			return o
		}
		w, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return nil
		}
		c = w.NetConn()
	}
	return nil
}

// ending records, for one Pipe, the first error either direction met and
// the first end of stream, until the relay closes both conns: what comes
// after that is the close's doing.
type ending struct {
	mu      sync.Mutex
	closing bool
	err     End // the first error (or idle, or stop); set when err.By != 0
	eof     Cause
}

// note records that by ended with err (nil: its end of stream), unless the
// relay is already closing the conns.
func (e *ending) note(by Cause, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.closing:
	case err == nil:
		if e.eof == 0 {
			e.eof = by
		}
	case e.err.By == 0:
		e.err = Classify(by, err)
	}
}

// close marks the conns closing: later ends are the close's doing. stop,
// when not nil, is the owner's reason, recorded unless an error came
// first.
func (e *ending) close(stop error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if stop != nil && !e.closing && e.err.By == 0 {
		e.err = End{By: EndStop, Err: stop}
	}
	e.closing = true
}

// end is how the flow ended, once both directions are done.
func (e *ending) end() End {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.err.By != 0:
		return e.err
	case e.eof != 0:
		return End{By: e.eof}
	}
	return End{By: EndStop}
}
