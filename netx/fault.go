package netx

import (
	"errors"
	"fmt"
	"sync/atomic"
)

// Fault is what a flow's failure says about where it came from, as the
// layer that owns the connection knows it: a proxy's typed reply, a
// protocol's framing, a carrier several flows share. Score's classifier
// (group/score.Classify) reads it to decide whether a failure is the
// target's or the node's; nothing else depends on it, and it never changes
// an error's text.
type Fault uint8

const (
	// FaultNone: the error says nothing of its provenance.
	FaultNone Fault = iota
	// FaultTargetRefused: the proxy replied that the target refused the
	// connection.
	FaultTargetRefused
	// FaultTargetPath: the proxy replied that the target is unreachable,
	// or its path failed behind a working proxy session.
	FaultTargetPath
	// FaultStreamReset: one stream of a multiplexed carrier was reset
	// while the carrier stayed up.
	FaultStreamReset
	// FaultProxyProtocol: the proxy answered outside its protocol, or
	// refused the request in a way that names no target.
	FaultProxyProtocol
	// FaultProxyAuth: the proxy refused the client's credentials.
	FaultProxyAuth
	// FaultFraming: the bytes from the proxy do not open or parse.
	FaultFraming
	// FaultCarrier: a carrier shared by several flows failed: its
	// connection's I/O, an HTTP/2 GOAWAY, a QUIC connection's loss.
	FaultCarrier
	// FaultSharedDial: one dial (or its backoff) several flows waited on
	// failed.
	FaultSharedDial
	// FaultSharedSource: a shared packet source or packet endpoint ended.
	FaultSharedSource
	// FaultXUDPEnd: the server closed an XUDP session with END|ERROR.
	FaultXUDPEnd
	// FaultVMessEOFBeforeHeader: a VMess server closed before any byte of
	// its response header.
	FaultVMessEOFBeforeHeader
	// FaultVMessBadHeader: a VMess response header was cut short or does
	// not open.
	FaultVMessBadHeader
	// FaultLocalRefusal: this process refused the work itself (dial
	// admission, a size or capacity bound): the upstream is not to blame.
	FaultLocalRefusal
	// FaultRetired: this process closed the carrier under the flow (a
	// purge, a reload, the outbound's close): no failure of anyone's.
	FaultRetired

	faultEnd
)

var faultNames = [...]string{
	FaultNone:                 "none",
	FaultTargetRefused:        "target refused",
	FaultTargetPath:           "target path",
	FaultStreamReset:          "stream reset",
	FaultProxyProtocol:        "proxy protocol",
	FaultProxyAuth:            "proxy auth",
	FaultFraming:              "framing",
	FaultCarrier:              "shared carrier",
	FaultSharedDial:           "shared dial",
	FaultSharedSource:         "shared source",
	FaultXUDPEnd:              "xudp end error",
	FaultVMessEOFBeforeHeader: "vmess eof before header",
	FaultVMessBadHeader:       "vmess bad header",
	FaultLocalRefusal:         "local refusal",
	FaultRetired:              "retired",
}

func (f Fault) String() string {
	if f < faultEnd {
		return faultNames[f]
	}
	return fmt.Sprintf("fault(%d)", uint8(f))
}

// A Faulted error knows its Fault, and the episode of a failure fanned out
// to several flows (0: a failure of its own). An error type that can tell
// its fault from its own fields (a SOCKS reply's status, an HTTP status)
// implements it; any other error is given one with WithFault.
type Faulted interface {
	error
	Fault() (Fault, uint64)
}

// FaultError is an error with its fault attached. Its text is Err's: the
// annotation never changes what a user reads.
type FaultError struct {
	Kind Fault
	// Episode names one failure every flow receiving it shares (all
	// streams of one failed carrier): from NewEpisode, or 0.
	Episode uint64
	Err     error
}

func (e *FaultError) Error() string          { return e.Err.Error() }
func (e *FaultError) Unwrap() error          { return e.Err }
func (e *FaultError) Fault() (Fault, uint64) { return e.Kind, e.Episode }

// WithFault returns err with fault f (nil for a nil err).
func WithFault(err error, f Fault) error {
	if err == nil {
		return nil
	}
	return &FaultError{Kind: f, Err: err}
}

// WithEpisode returns err with fault f and the episode ep: the one error
// the owner of a shared carrier, source or dial hands every flow it fails.
func WithEpisode(err error, f Fault, ep uint64) error {
	if err == nil {
		return nil
	}
	return &FaultError{Kind: f, Episode: ep, Err: err}
}

var episodes atomic.Uint64

// NewEpisode returns a process-unique, non-zero episode identity, for one
// failure of a shared carrier, source or dial. It allocates nothing.
func NewEpisode() uint64 { return episodes.Add(1) }

// FaultOf returns the fault of the outermost Faulted error in err's chain
// (FaultNone and 0 when there is none).
func FaultOf(err error) (Fault, uint64) {
	var f Faulted
	if errors.As(err, &f) {
		return f.Fault()
	}
	return FaultNone, 0
}
