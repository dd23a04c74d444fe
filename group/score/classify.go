package score

// # Classify: an upstream error's provenance
//
// Classify turns the error that ended a flow's upstream into the Failure
// a Reporter's Fail takes, or says it is neutral (Cancel). It reads only
// the error: the typed provenance the layer owning the connection
// attached (netx.Fault, netx.Faulted) and the process's own sentinels. It
// never parses an error's text.
//
//	neutral (Cancel)                      the flow was ended here, not failed upstream:
//	  plane.ErrRetired, plane.ErrDrained    a reload retired or drained its outbound version
//	  track.ErrKilled                       killed or interrupted through the tracker
//	  outbound.ErrBlocked, outbound.ErrNoUDP  a route's block; an outbound without datagrams
//	  netx.FaultLocalRefusal                dial admission ran out waiting, a size or capacity bound
//	  netx.FaultRetired                     this process closed the carrier (a purge, a reload)
//	  context.Canceled                      the flow's owner gave up
//	  net.ErrClosed                         this side closed the conn or link
//	typed fault                           the kind the fault names, before or after setup:
//	  FaultTargetRefused → TargetRefused, FaultTargetPath → TargetPath,
//	  FaultStreamReset → StreamReset, FaultProxyProtocol → ProxyProtocol,
//	  FaultProxyAuth → ProxyAuth, FaultFraming → Framing,
//	  FaultCarrier → SharedCarrier, FaultSharedDial → SharedDial,
//	  FaultSharedSource → SharedSource, FaultXUDPEnd → XUDPEndError,
//	  FaultVMessEOFBeforeHeader → VMessEOFBeforeHeader,
//	  FaultVMessBadHeader → VMessBadHeader
//	anything else                         UnknownPreSetup before setup (timeouts included),
//	                                      FlowIO after it
//
// The explicit sentinels come first (a drain ends a flow with an error that
// also matches net.ErrClosed), then the typed fault (a carrier's failure is
// the carrier's even when its cause is a closed socket), then a plain
// net.ErrClosed.
//
// # Episodes
//
// A shared carrier, source or dial that fails several flows at once hands
// every one of them the same error value, carrying one episode from
// netx.NewEpisode (a process-wide counter: no scorer involved, so the
// layers below never see Score). Classify maps it to the EpisodeID
// EpisodeID(episodeBit | ep): the Scorer's own episodes (Scorer.NewEpisode,
// and the ones Fail draws for a zero Episode) count up from 1 and never
// reach 2^63, so the two spaces cannot collide, and the mapping needs no
// state — Classify is a pure function of its arguments. An error without
// an episode keeps the zero EpisodeID: a failure of its own.

import (
	"context"
	"errors"
	"net"

	"switchyard/netx"
	"switchyard/outbound"
	"switchyard/plane"
	"switchyard/track"
)

// episodeBit marks an EpisodeID that came from netx.NewEpisode.
const episodeBit = 1 << 63

// faultKinds maps a typed fault to the kind it proves.
var faultKinds = [...]FailureKind{
	netx.FaultTargetRefused:        TargetRefused,
	netx.FaultTargetPath:           TargetPath,
	netx.FaultStreamReset:          StreamReset,
	netx.FaultProxyProtocol:        ProxyProtocol,
	netx.FaultProxyAuth:            ProxyAuth,
	netx.FaultFraming:              Framing,
	netx.FaultCarrier:              SharedCarrier,
	netx.FaultSharedDial:           SharedDial,
	netx.FaultSharedSource:         SharedSource,
	netx.FaultXUDPEnd:              XUDPEndError,
	netx.FaultVMessEOFBeforeHeader: VMessEOFBeforeHeader,
	netx.FaultVMessBadHeader:       VMessBadHeader,
	netx.FaultLocalRefusal:         0, // neutral, answered before the table
	netx.FaultRetired:              0,
}

// Classify maps err, the upstream error that ended a flow, to its Failure;
// afterSetup tells whether the flow's proxy session (its packet path) was
// set up. neutral reports an end that is no failure (the flow is Cancelled:
// rejection, cancellation, retirement, a local refusal); f is then zero. A
// nil err is neutral.
func Classify(err error, afterSetup bool) (f Failure, neutral bool) {
	if err == nil || neutralEnd(err) {
		return Failure{}, true
	}
	if fault, ep := netx.FaultOf(err); fault != netx.FaultNone {
		if fault == netx.FaultLocalRefusal || fault == netx.FaultRetired {
			return Failure{}, true
		}
		if int(fault) < len(faultKinds) && faultKinds[fault] != 0 {
			f.Kind = faultKinds[fault]
			if ep != 0 {
				f.Episode = EpisodeID(episodeBit | ep)
			}
			return f, false
		}
	}
	if errors.Is(err, net.ErrClosed) {
		return Failure{}, true
	}
	if afterSetup {
		return Failure{Kind: FlowIO}, false
	}
	return Failure{Kind: UnknownPreSetup}, false
}

// neutralEnd reports whether err is one of the process's own ends of a
// flow.
func neutralEnd(err error) bool {
	return errors.Is(err, plane.ErrRetired) || errors.Is(err, plane.ErrDrained) ||
		errors.Is(err, track.ErrKilled) || errors.Is(err, outbound.ErrBlocked) ||
		errors.Is(err, outbound.ErrNoUDP) || errors.Is(err, context.Canceled)
}
