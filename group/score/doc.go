// Package score is the Score policy's logic: the evidence core (what real
// business traffic proved about each (group, node), per target, kept in
// bounded memory-only tables: this file and cell.go, reporter.go,
// scorer.go, view.go), the serving pool (pool*.go, documented at the top
// of pool.go) and the trial budget (budget*.go, documented at the top of
// budget.go). It is pure logic: no sockets, no goroutine, no timer.
// Events carry their own event times; reads use an injected Clock
// (healthtest.Clock in tests).
//
// Ranking, comparison evidence, reason counters and the wiring into the
// group manager and the data path are built on top of it; nothing here
// selects a node, and the configuration does not accept the policy yet.
//
// # API
//
//	s := score.New(clock, members)            // the configuration's (group, node, incarnation)
//	r, err := s.Begin(scope, at)              // one business flow; counts an attempt
//	r.Setup(at); r.Progress(at, tx, rx); r.Response(at)
//	r.Settle(at) | r.Fail(at, failure) | r.Cancel(at)   // exactly one outcome
//	v, err := s.View(scope)                   // the blended read
//	s.RecordProbe(group, network, node, started, rtt, ok)
//	s.Reload(at, members)                     // prune and fence
//	ep := s.NewEpisode()                      // one fanned-out failure's identity
//
// A Scope is (group UUID, TCP/UDP, target family, target, node ID). The
// Reporter is the flow's: it keeps its own id (a reporter and anything
// sharing it count once per cell and cohort), its setup, first-TX and RX
// times and the cells it was begun on.
//
// # Cells and keys
//
// The exact key is (group, TCP/UDP, target family, normalized target,
// node). Domains are ASCII-lowercased with one trailing dot removed and
// keep their port ("Example.COM.:443" → "example.com:443"); IP targets
// keep their socket address; an IP target's own family overrides the
// Scope's. A name longer than 253 bytes, an empty one or one holding a
// control byte or a space is refused (ErrBadTarget). Exact cells live in
// a 4,096-entry LRU. The aggregate key is (group, TCP/UDP, family or
// none, node): the family aggregate and the global aggregate (no family),
// in a separate 4,096-entry LRU. Targetless work (the zero target) feeds
// only the aggregates.
//
// The LRU is the package's own (lru.go), not hashicorp/golang-lru: each
// entry is one allocation holding its key, its cell and its links, a hit
// allocates nothing, and removal marks the cell dead so a reporter holding
// it drops its events — an evicted or pruned cell is never fed or
// recreated by an old reporter — which a generic cache's eviction
// callback could do only with a second index.
//
// # Decay, blending and bounds
//
// Attempts, successes, failures and setup failures decay with a 30-minute
// half-life (HalfLife), exactly: a cell stores its counts as of its latest
// event time and multiplies them by 2^(-Δ/HalfLife) on read; a late event
// is added at its own age.
//
// A View blends global → family → exact. Each step moves from the parent
// toward the more specific layer in proportion to that layer's own
// decayed outcomes (successes plus failures), reaching the layer alone at
// BlendThreshold = 8: twice the four completions that qualify, so a
// target leans on its aggregates until it has repeated that evidence
// once, and one or two exact failures move a mature aggregate prior a
// quarter of the way, not all of it. The blend interpolates; overlapping
// counts are never added. Support is the largest of the layers'
// separately decayed success counts, never their sum.
//
// The bounds are those of the Beta(1 + S, 1 + F + (w−1)·SF) posterior of
// the blended counts (S successes, F failures, SF of them before setup):
// its mean ∓ 1.96 standard deviations, clipped to [0, 1] — the normal
// approximation of its 2.5 % and 97.5 % quantiles, cheap enough for a
// per-flow rank and monotone in every count. The setup-failure weight w
// (SetupFailureWeight) is 2: a flow that failed before setup carried
// nothing and cost the user a failed open (under Score, also the one
// sequential retry inside the same establishment deadline), so it counts
// as two failed flows; 2 and not more, so that one transient cold-start
// failure of a node with four completions moves its mean from 5/6 to 5/8
// rather than evicting it.
//
// # Failure provenance
//
// Every failure keeps its numeric outcome in the global, family and exact
// layers. Its kind decides where it opens hard failure state:
//
//	kind                  provenance  what it is
//	TargetPath            target      the node-to-target path failed behind a working proxy
//	TargetRefused         target      the target refused before setup (typed proxy reply)
//	StreamReset           target      an H2MUX stream reset or user error, its connection healthy
//	AnyTLSSynAckTimeout   target      the target's SYNACK timed out on an active AnyTLS session
//	EndToEndQUIC          target      end-to-end DoQ/DoH3 failure through a healthy packet proxy
//	EndpointStream        target      packet DNS endpoint: buffered stream reset, EOF, malformed H3
//	FlowIO                target      upstream I/O error on the flow's own connection after setup
//	VMessEOFBeforeHeader  target      EOF before any VMess response-header byte: ambiguous, so it
//	                                  remains an I/O failure of the flow, not the node's
//	ProxyProtocol         node        typed proxy protocol error
//	ProxyAuth             node        the node refused the credentials
//	Framing               node        malformed framing or handshake
//	SharedCarrier         node        shared carrier failure (mux connection I/O, H2MUX GOAWAY)
//	SharedDial            node        a shared dial failed
//	SharedSource          node        a shared packet source or packet endpoint failed
//	XUDPEndError          node        XUDP END|ERROR closed a shared multi-target source
//	QUICPathStall         node        a proven QUIC path stall retired the carrier
//	EndpointLoss          node        typed packet-endpoint (adapter) loss
//	AnyTLSSessionRetired  node        silent AnyTLS session retired
//	UoTOpenFailed         node        UDP-over-TCP service open failed
//	VMessBadHeader        node        partial or malformed VMess response header
//	UnknownPreSetup       node        anything unclassified before setup, timeouts included
//	(unknown kind)        node        the conservative side
//	(targetless work)     node        any kind: a failure with no target is the node's
//
// Not failures (call Cancel, which records no outcome and keeps factual
// RX): client-side relay errors (reset, abort, broken pipe, unexpected
// EOF, timeout, unreachable on the client side), rejection, local typed
// and capacity refusals, cancellation, intentional retirement,
// packet-local congestion, reply-idle expiry after a reply, and shutdown.
//
// A target-scoped failure opens hard state only in its exact cell. A
// node-scoped one records the node's episode in the global aggregate,
// which fences every cell depending on it: family aggregates and exact
// cells apply the record when they are next touched or read (lazily, by
// a scorer-wide sequence number), losing qualification, lease and cohort,
// and the probe slot rejects probes started at or before it. An unrelated
// target failure leaves probes and other targets alone.
//
// A failure carries an EpisodeID: every flow failed by one fanned-out
// carrier, source, packet-endpoint or dial failure (all H2MUX streams of
// one connection, all flows bound to one XUDP source) reports the same
// one, from NewEpisode; the zero EpisodeID is a failure of its own. A
// cell that already applied an episode counts a delayed report of it
// numerically without reopening or resetting anything. A cell created
// during an open node episode inherits it (it is hard and needs its own
// four reporters); one created after the node recovered inherits the
// failure time (its fence) and the episode identity. Cells carry the
// node incarnation; a reload that changes it drops them.
//
// # Qualification, lease and recovery
//
// A useful completion is a Settle of a targeted reporter that had
// eligible RX: positive RX at or after its setup and its first positive
// TX. A cell qualifies at four (Qualify) effective useful completions:
// each reporter counts once, and only completions whose RX and settlement
// follow the cell's latest failure or reload fence count (the count is
// not decayed: four completions a second apart decay to less than four).
// Qualification lasts 60 s (Lease) from its event; fresh eligible RX
// renews an earned qualification for 60 s from the RX's event time
// without adding completions. RX on a cell that has not earned it (cold,
// or fenced by a reload) creates no lease. Failure and reload revoke it.
//
// An availability cohort is the set of distinct reporters with eligible
// RX strictly after the cell's fence, each joining once; later eligible
// RX refreshes its time. A failure applying to the cell, a reload, or
// eligible RX at least 60 s (CohortGap) after the cohort's latest resets
// it, so one returning reporter never revives four old credits; a
// settlement flushing RX older than the cohort's expired support does
// not join it. Four reporters (Reporters) make the cell usable (View's
// Usable); in a cell with an open hard episode they close it and grant
// a qualification lease of 60 s from the fourth RX, without erasing the
// failure or adding successes. Each cell needs its own four: a target
// does not recover because the node aggregate did. After a reload with
// no failure, four reporters make a cell usable but not qualified.
// Probes, warm-up, targetless work, TX-only work and RX before setup or
// TX never earn availability; RX is published at most once per second
// per reporter (the first at once), a suppressed one at the next
// publishable RX or at settlement, at its own event time.
//
// # Reload, privacy and bounds
//
// Reload drops cells whose group or node left the configuration or whose
// node changed incarnation (their reporters go inert; Begin refuses the
// pair with ErrNotMember), and fences every surviving cell: leases,
// qualification, cohorts and probe baselines go; numeric evidence and
// open hard episodes stay. Admitted reporters of surviving cells keep
// reporting under the fence.
//
// Evidence is memory-only: never logged, persisted or exported with a
// node or target identity. Scope and Reporter print, log (slog.LogValuer)
// and marshal only their network and family; View and Layer hold counts
// and flags only.
//
// Both tables are capped at 4,096 cells (ExactCells, AggregateCells); the
// node record and the probe slot live inside the global aggregate cell,
// and the per-flow state lives in the flow's Reporter, so nothing else
// grows. Measured (TestMemoryAtBounds, BenchmarkTablesAtBounds, amd64,
// without the race detector), both tables full hold about 3.5 MiB of heap
// with 24-byte target names (≈ 448 B per cell: map slot, key, entry with
// links and the target string) and about 4.5 MiB with 253-byte names, the
// longest accepted. On a shared, loaded 2-core machine a flow's reporting
// (Begin to Settle) costs 1–1.4 µs and 2 allocations, a View about 0.6 µs
// and 1 allocation (BenchmarkReportFlow, BenchmarkView).
package score
