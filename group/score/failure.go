package score

import "fmt"

// FailureKind is the typed provenance of a failed business flow: what
// failed, as the layer that owns the connection knows it. Its Scope
// decides which evidence the failure may put into hard failure state; the
// package documentation tables every kind.
type FailureKind uint8

const (
	// Target-scoped: the node carried the flow; the target or its path
	// failed.

	// TargetPath: the path from the node to the target failed (the
	// proxy reported the target unreachable, or the target connection
	// failed behind a working proxy session).
	TargetPath FailureKind = iota + 1
	// TargetRefused: the target refused the connection before setup
	// completed (a typed proxy reply saying so).
	TargetRefused
	// StreamReset: one multiplexed stream was reset or ended with a user
	// error (an H2MUX stream reset) while its connection stayed healthy.
	StreamReset
	// AnyTLSSynAckTimeout: the target's TCP SYNACK timed out on an
	// otherwise active AnyTLS session.
	AnyTLSSynAckTimeout
	// EndToEndQUIC: an established end-to-end DoQ/DoH3 exchange failed
	// through a healthy packet proxy; that is no proxy-carrier failure.
	EndToEndQUIC
	// EndpointStream: a packet-backed DNS endpoint saw a buffered stream
	// reset, an EOF or a malformed H3 response — not endpoint loss.
	EndpointStream
	// FlowIO: an upstream I/O error on this flow's own connection after
	// setup, with no carrier-typed cause.
	FlowIO

	// Node-scoped: the node (or a carrier it owns) failed.

	// ProxyProtocol: a typed proxy protocol error from the node.
	ProxyProtocol
	// ProxyAuth: the node refused the client's credentials.
	ProxyAuth
	// Framing: the node's framing or handshake was malformed.
	Framing
	// SharedCarrier: a carrier shared by several flows failed (a mux
	// connection's I/O, an H2MUX GOAWAY, a QUIC connection).
	SharedCarrier
	// SharedDial: one dial shared by several flows failed.
	SharedDial
	// SharedSource: a shared packet source or packet endpoint failed.
	SharedSource
	// XUDPEndError: XUDP END|ERROR closed a shared multi-target source;
	// its bound flows keep the source's attribution.
	XUDPEndError
	// QUICPathStall: a proven QUIC path stall retired the shared carrier,
	// whatever the immediate packet-local error.
	QUICPathStall
	// EndpointLoss: a packet-backed DNS endpoint lost its adapter (typed
	// endpoint loss).
	EndpointLoss
	// AnyTLSSessionRetired: an AnyTLS session was retired as silent.
	AnyTLSSessionRetired
	// UoTOpenFailed: a UDP-over-TCP service open failed.
	UoTOpenFailed
	// VMessEOFBeforeHeader: a VMess server closed before any
	// response-header byte. Ambiguous (the target may have closed the
	// relayed connection as well as the node), so it stays an I/O
	// failure of the flow: target-scoped, like FlowIO. Partial or
	// malformed headers (VMessBadHeader) and actual carrier errors keep
	// node provenance.
	VMessEOFBeforeHeader
	// VMessBadHeader: a partial or malformed VMess response header.
	VMessBadHeader
	// UnknownPreSetup: any unclassified failure before setup completed
	// (establishment timeouts included).
	UnknownPreSetup

	kindEnd
)

var kindNames = [...]string{
	TargetPath:           "targetPath",
	TargetRefused:        "targetRefused",
	StreamReset:          "streamReset",
	AnyTLSSynAckTimeout:  "anytlsSynAckTimeout",
	EndToEndQUIC:         "endToEndQUIC",
	EndpointStream:       "endpointStream",
	FlowIO:               "flowIO",
	ProxyProtocol:        "proxyProtocol",
	ProxyAuth:            "proxyAuth",
	Framing:              "framing",
	SharedCarrier:        "sharedCarrier",
	SharedDial:           "sharedDial",
	SharedSource:         "sharedSource",
	XUDPEndError:         "xudpEndError",
	QUICPathStall:        "quicPathStall",
	EndpointLoss:         "endpointLoss",
	AnyTLSSessionRetired: "anytlsSessionRetired",
	UoTOpenFailed:        "uotOpenFailed",
	VMessEOFBeforeHeader: "vmessEOFBeforeHeader",
	VMessBadHeader:       "vmessBadHeader",
	UnknownPreSetup:      "unknownPreSetup",
}

func (k FailureKind) String() string {
	if k > 0 && k < kindEnd {
		return kindNames[k]
	}
	return fmt.Sprintf("failureKind(%d)", uint8(k))
}

// Provenance is where a failure may open hard failure state.
type Provenance uint8

const (
	// NodeScoped failures open the node's episode: the node aggregate
	// and every cell depending on it (its targets, its probe slot).
	NodeScoped Provenance = iota
	// TargetScoped failures open hard state only for the exact target;
	// the aggregates keep only the numeric outcome.
	TargetScoped
)

func (p Provenance) String() string {
	if p == TargetScoped {
		return "target"
	}
	return "node"
}

// Provenance returns where k may open hard failure state. An unknown
// kind is node-scoped, the conservative side.
func (k FailureKind) Provenance() Provenance {
	if k >= TargetPath && k <= FlowIO || k == VMessEOFBeforeHeader {
		return TargetScoped
	}
	return NodeScoped
}

// EpisodeID names one failure episode. Every flow that receives one
// fanned-out carrier, source, packet-endpoint or shared-dial failure (all
// H2MUX streams of one connection, all flows bound to one XUDP source)
// reports it with the same EpisodeID, from Scorer.NewEpisode; the zero
// EpisodeID is an independently constructed failure, an episode of its
// own.
type EpisodeID uint64

// Failure is a failed flow's report: its kind and, for a fanned-out
// failure, the shared episode.
type Failure struct {
	Kind    FailureKind
	Episode EpisodeID
}
