// Package score is the Score policy's logic. The Engine (engine*.go,
// rank*.go, attempt.go, stats.go) is what the group manager and the data
// path use: it ranks one flow's candidates in one Score group, carries
// the chosen plan's pending work (its serving-pool obligation and, for a
// funded trial, its reservation) and turns the flow's I/O events into
// evidence. Under it: the evidence core (what real business traffic
// proved about each (group, node), per target, kept in bounded
// memory-only tables: this file and cell.go, reporter.go, scorer.go,
// view.go), the serving pool (pool*.go, documented at the top of
// pool.go), the trial budget (budget*.go, documented at the top of
// budget.go), the comparison store (compare.go) and the switch history
// (history.go). It is pure logic: no sockets, no goroutine, no timer.
// Events carry their own event times; reads use an injected Clock
// (healthtest.Clock in tests).
//
// # Engine
//
//	e := score.NewEngine(clock)
//	e.Configure(at, specs)            // at start and every reload
//	d := e.Rank(at, &req)             // one flow's selection in one group
//	f, err := d.Attempt.Begin(at)     // node-specific work starts; or d.Attempt.Release(at)
//	f.Setup(at); f.Progress(at, tx, rx); f.Response(at)
//	f.Settle(at) | f.Fail(at, failure) | f.Cancel(at)
//	e.Probe(network, node, started, rtt, ok, interval); e.NodeDown(node, at)
//	e.Pressure(node, network, hint.At)  // a carrier-pressure hint: reopens freshness only
//	e.Stats()                         // /switchyard/v1/stats/score and the metrics
//	e.Explain(at, q)                  // the readonly conditional-verification summary (explain.go)
//
// Configure publishes one immutable configuration (an atomic pointer:
// ranks never wait for it) and reloads the Scorer, the pools and the
// budget with the new (group, node, incarnation) set; a group absent from
// it is dropped with its pools, scopes and counters. A reload also
// clears the comparison store: committed reload is a fence of every
// comparison, and comparisons live at most a minute (business) or four
// probe blocks anyway. A group the configuration does not hold, or a
// target that cannot key evidence (ErrBadTarget), is ranked unscored:
// the first eligible candidate, with an Attempt whose Flow reports
// nothing.
//
// # Ranking
//
// Rank reads every evaluated candidate's View and first-choice metrics
// under one Scorer lock (rankViews; an exact cell remembers its
// aggregates, so a warm member costs one table lookup). The evaluated candidates are the
// serving pool's members; every candidate when the pool is not yet
// initialized, when the authorized Apply is due to do more than its
// quiet scan (it then ranks them all), or when no member is available —
// a flow is then served by the best available non-member rather than
// refused, with no pool obligation. The authorized Apply itself is
// skipped when it was quiet as the rank began and the winner is not the
// rotation member: a quiet Apply commits nothing.
//
// Eligibility is the caller's (the liveness filter), minus the retry's
// excluded node, minus any candidate in unresolved hard failure (an open
// episode in its exact, family or global layer); the latter are counted
// in failStreakExcluded, the caller's ineligible ones in deadFiltered.
// When every available member is in unresolved failure the best of them
// still serves (failures and backoff stay authoritative; recovery needs
// real traffic).
//
// Utility is the blended success rate (View.Rate) plus PerfWeight (0.25)
// times the performance heuristic: the mean, over the comparable
// metrics, of each row's normalized score. The metrics are the probe RTT
// (the global aggregate's probe slot), setup latency (begin → setup, from
// the node-level family aggregate), response latency (first TX or setup
// → first response byte) and up/down goodput (from the exact target, or
// the family aggregate for targetless work). Each is normalized in its
// own scope, never pooled with another as milliseconds: best/value for
// latencies, value/best for goodput, the best taken over the serving
// pool's members (serving-pool-relative). A metric is a bounded
// four-observation WeightedMean (weights 4, 3, 2, 1, newest first) of its
// unexpired observations: full confidence while the newest is at most
// 60 s old, falling linearly to none at 120 s, when it expires whatever
// the completion count.
//
// The probe is the baseline. The spec: "configured probe RTT supplies a
// baseline; fresh comparable target response and directional goodput can
// override it". So the probe RTT counts when some reference row has one;
// every other metric counts only when comparable, measured on at least
// two reference rows (one row's lone measurement is its own best and says
// nothing of the others). A row's score for a counted metric is
// conf·normalized + (1 − conf)·baseline, a missing or expired metric
// scoring the baseline: the row's own normalized probe score, or 0.5 (as
// if half as good as the best: neither a win nor a loss) without a valid
// probe. Only the probe's normalized score carries over, never its
// milliseconds. Before this, a flat 0.5 for a missing metric and a lone
// measurement's 1.0 made a node measured fifty times slower to the probe
// and on setup read as the better performer on the targets only it had
// served (the faster node unmeasured there), and as half as good as the
// best on the others — so a fast node whose aggregate carried other
// targets' target-path failures (numerically, as the spec keeps them)
// lost, on a 0.002 utility difference, targets it had served cleanly.
// 0.25 keeps reliability first: the largest performance lead, 0.25
// (every metric best against a row far behind on all of them, its probe
// too), outweighs at most a 25-point success-rate gap, and 0.125 against
// a row with no probe and no measurement.
//
// The ordinary selection follows the (group, network, family, target)
// history's incumbent:
//
//   - no history: the first choice, the highest-utility eligible member;
//   - the incumbent is not a healthy candidate or no longer a member:
//     immediate escape to the best member (incumbentIneligible);
//   - the incumbent is in unresolved failure: escape (freshFailureBypass)
//     when another member is clean, otherwise it holds;
//   - the incumbent is untrained (neither qualified in the rank's scope
//     nor with a decayed support of four completions): the first choice
//     again (it follows evidence);
//   - a trained, eligible, recovered incumbent: every clean member
//     competes against it on paired evidence (below) and the largest
//     combined gain clearing the hold margin is promoted.
//
// Promotion. A pair is read from the comparison store: the exact target
// when its response is known; else at most eight response-qualified
// common targets of the same (group, network, family) in canonical order
// (their normalized text), weighted equally, a direction known only when
// it is known on every chosen target; else the same current probe cohort
// (same cadence; response only). A metric is known when both sides have
// four distinct reporters in their shared live blocks. The response gain
// (incumbent − challenger)/incumbent counts beyond the 10 % equivalence
// band and when the challenger is trained and not reliably worse
// (incumbent's lower bound ≤ challenger's upper); a response more than
// 10 % slower vetoes performance. Directional goodput contributes the
// larger known gain when some known direction gains at least 10 %, no
// known direction regresses more than 10 %, the response is not more
// than 10 % slower and the challenger's observed terminal success share
// in the scope is at least the incumbent's; opposing known changes are a
// tradeoff. Reliability gains (challenger's lower bound above the
// incumbent's upper) add the difference of the rates. The combined gain
// must exceed the hold margin HoldMargin·min(1, support/HoldSupport):
// HoldMargin = 0.005 (the spec's cap), reached at HoldSupport = 8
// completions, where support is the incumbent's largest separately
// decayed layer count (View.Support), so sparse exact evidence cannot
// reduce mature protection. The margin is small because the 10 % band
// already absorbs noise: it only keeps a gain that barely clears the
// band from moving a mature incumbent on a rounding difference, and it
// does not grow further so that a clear paired win always promotes.
//
// Reasons. An authorized (neither Peek nor Retry), multi-candidate,
// non-last-resort rank counts exactly one final reason. A funded trial
// makes it coldExplore (the challenger has no completion in the scope)
// or periodicExplore; otherwise: a first choice is coldExplore when no
// candidate has any evidence (not an attempt, not a probe), else
// reliabilityWinner when the success-rate lead over the runner-up
// exceeds its weighted performance gap, else performanceWinner; an
// escape is incumbentIneligible or freshFailureBypass; a promotion is
// reliabilityWinner when the reliability part is the larger, else
// performanceWinner; a hold is directionalTradeoffHeld (some challenger
// showed opposing known directions), insufficientEvidenceHeld (the
// utility winner differs from the incumbent and has no qualified shared
// response comparison with it) or incumbentHeld. ordinarySwitch counts a
// committed ordinary selection changing the history's known incumbent;
// switchFlap one returning to the prior winner fewer than eight ordinary
// selections after the switch away from it. The history is a 4,096-entry
// LRU (HistoryEntries); an evicted entry proves no switch. Trials never
// enter it.
//
// Readonly ranks. A Peek changes nothing: no Apply, no counter, no
// reservation, no history, no Attempt; it reads the committed membership
// or, before the pool exists, Pool.Peek's temporary projection. A
// Preflight (the internal IPv4 preflight before an IPv6 final) is a Peek
// through the prospective membership the Apply would commit now
// (Pool.Project).
//
// The walk. An authorized targeted rank that did not escape to a
// different leaf offers the other healthy members to the budget's Walk
// with their open question: recovery (in hard failure), qualification
// (not qualified in the scope), availability (qualified, not usable), a
// pair (no fresh, non-partial paired business response of the scope
// with the selection: the exact target's own pair — common targets for
// an aggregate read; configured probes never settle it — from blocks
// newer than the freshness cut of the selection's response degradation
// and both nodes' carrier-pressure hints, pressure.go), or none (not
// offered). Dispatch order's progress toward the question is the exact
// cell's successes for qualification and, for a pair, the challenger's
// distinct response reporters already sharing live blocks with the
// selection. Trained means at least one decayed completion;
// completions are the decayed support; unfinished work is the member's
// begun, unsettled non-trial flows on the network. A funded challenger
// becomes the decision, its Attempt carrying the Reservation; the
// walk's budgetBlocked, inFlight and backed-off counts are the stats'.
//
// Attempt and Flow. Begin rechecks the pool plan (a *CancelError
// refunds the unbegun reservation), spends the reservation and begins
// the Reporter; an ordinary attempt whose pair left the configuration
// proceeds unscored, a trial refuses. The Flow feeds setup and response
// latency to the cells and the response to the comparison store (its
// admission following serving membership, the four recent Apply winners
// and initial collection), cuts Progress into goodput windows
// (goodput.go), and at its end settles the trial (success with eligible
// RX, else inconclusive; failed; a target refusal refused), tells the
// pool (NodeOK on a useful completion, NodeFailed on a node-scoped
// failure), backs off the node's trials after a real failure as its
// provenance says — every trial in the scope after a node-scoped one
// (Budget.Failed, or a TrialFailed trial), only those on the flow's
// target after a target-scoped one (Budget.TargetFailed, or a
// TrialTargetFailed trial; a target refusal backs off nothing) — and
// fences the comparison cells the failure invalidates. Eligible RX on a
// cell in hard state, strictly after its fence, ends the node's backoff
// and its backoff on the flow's target (Budget.Recovered). Trials' elapsed and
// setup time are the budget's cost counters.
//
// Measured (amd64, a 2-core machine shared with other builds, no race
// detector; BenchmarkRank50, BenchmarkRank50Peek, BenchmarkFlowReport,
// BenchmarkEngineAtBounds, TestEngineMemoryAtBounds, and the group
// package's BenchmarkScoreSelect50): an authorized rank in a 50-member
// group with warm evidence (a pool of 9 evaluated members, a trial
// reserved and released every iteration) cost 6.2–10 µs in the first
// build and 5–7.2 µs after the first round of cuts. After the second
// round, in ten alternating runs of the two builds (load average about
// 3), it costs a median of 4.2 µs (3.8–6.1) against 5.2 µs (4.8–10.6),
// about a fifth less, and 1 allocation (the Attempt); the whole group
// selection (the candidates through the liveness filter, the rank, the
// Attempt on the query, 64 rotating destinations) a median of 4.4 µs
// (3.7–6.8) against 5.1 µs (4.3–9.3), 3 allocations (the Attempt, the
// new destination's normalized text, the benchmark's query). Both stay
// above the 2 µs target. A golden decision log (TestDecisionLogGolden:
// 6,000 random ranks of a 24-leaf group with targets, targetless work,
// eligibility churn, probes, goodput, target- and node-scoped failures,
// cancellations and long gaps; every decision, reason, trial and
// utility) is identical before and after each cut.
//
// The first round: the evaluated rows are iterated as a compact index
// list instead of every candidate (views, utilities, decide, the walk's
// questions, the probe order), the probe order is a binary search in the
// sorted RTTs instead of a quadratic scan, the incumbent's comparison
// cells are looked up once per rank for all its pairs under one lock
// (and the exact target's challenger cell once per pair), the walk takes
// members' incarnations from the configuration instead of the budget's
// table, the per-member hint read is skipped while no hint of the group
// is fresh, the scratch remembers its latest normalized target (no
// allocation for consecutive flows to one destination), views are
// written in place, the history's commit reuses the entry the rank read,
// the earn looks its demand entry up once, and the scratch remembers
// which cells its latest target's rows resolved to while neither
// evidence table inserted or removed a cell (pointers, never values).
//
// The second round: a view's three layers share one decay factor when
// their latest event time is the same (one flow's event reaches all
// three, so one exponential per member instead of three, the same value
// bit for bit); a rank's pooled views are written field by field with
// no pointer store (the layers' LeaseUntil, which a rank never reads,
// stays zero), so the batched read takes no write barrier while the
// collector runs; a probe-cohort pair reads only the response, checking
// the cohort's expiry before any block; the scratch remembers, per
// incumbent, its comparison cells and each challenger row's matching
// cells while the store inserted or removed none (its shape sequence);
// the committed membership is read once and rows, winners and dead
// candidates are marked in one pass; and the group builds its candidate
// rows in place in local slices (no slice header stored into the pooled
// scratch per member, the Subgroup pointer only when it changes).
//
// Where the remaining 4.2 µs go (CPU profile shares of the rank): the
// nine members' views 16 % (three layers, the blend and Beta bounds,
// four metrics each; one exponential per member remains, since a
// member's cells decay from their own event times); the walk 20 % (the
// budget's order, a stable sort of the challengers by value, and the
// reservation and its ledger, 12 %; the challengers' questions 7 %);
// decide 13 % (the history, nine pair reads and promotions); the
// utilities 8 %; the pool's mark, due check and plan 9 %; the Attempt's
// allocation 6 %; the earn 4 %; and about 15 % in the runtime's
// asynchronous preemption and the collector, the rest the rank's loops
// over the 50 candidates. No single item is near the 1.2 µs a 2 µs rank
// would have to lose: reaching it needs structural change — decayed
// counts kept against one reference time so a rank computes a single
// factor (results then differ in the last bits), a per-scope cache of
// the walk's ordered challengers, and an Attempt the data path returns.
// A peek of the same group (cold evidence) costs about 1.4 µs and no
// allocation; a flow's reporting through the Engine (Begin to Settle)
// about 1.8 µs and 3 allocations (unchanged by the second round); the
// whole Engine after 10,000 distinct targets over 100 nodes about
// 5.3 MiB of heap (the exact LRU and the history at 4,096, the
// comparison store at 512 cells and about 420 KiB accounted).
//
// # The evidence core
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
// a cell's first-choice metrics in a block of its own allocated on the
// first measurement, and the per-flow state in the flow's Reporter, so
// nothing else grows. Measured (TestMemoryAtBounds,
// BenchmarkTablesAtBounds, amd64, without the race detector), both
// tables full hold about 3.7 MiB of heap with 24-byte target names
// (≈ 471 B per cell: map slot, key, entry with links and the target
// string; no metrics) and about 4.7 MiB with 253-byte names, the longest
// accepted. On a shared, loaded 2-core machine a flow's reporting
// (Begin to Settle) costs 1–1.4 µs and 2 allocations, a View about 0.6 µs
// and 1 allocation (BenchmarkReportFlow, BenchmarkView).
package score
