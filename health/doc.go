// Package health is the health of every node a group may select (the
// AliveDialerSet): liveness, latency and failure strikes, keyed by NodeID,
// learnt from probes and from real traffic, and the runner that probes.
//
// # States
//
// Every node has six independent states: the three domains (TCP, DNS over
// the packet path, other datagrams over the packet path) across IPv4 and
// IPv6. A state nothing ever reported on is alive; an ID that is not
// registered reads as not alive. A state dies after ProbeFailures
// consecutive probe failures, or after TrafficFailuresTCP,
// TrafficFailuresDNSUDP or TrafficFailuresDataUDP consecutive real-traffic
// failures of its domain; the two counts are separate. (A threshold of one
// probe failure would let a transient loss eject an incumbent before
// selection, bypassing tolerance hysteresis.) A UDP domain does not die
// while its sibling UDP domain is explicitly alive (observed alive and not
// dying by the same event), so a blocked :53 does not purge working flows.
// An alive→dead transition calls Options.OnDeath; every transition calls
// Options.OnChange and logs a line at info ("node hk tcp/V4 dead after 3
// probe failures", "node hk tcp/V4 alive again").
//
// Each probe failure sets a cooldown: the n-th consecutive one waits
// CooldownMin doubled n-1 times, at most CooldownMax (5, 10, 20, 40, 80,
// 160, 300, 300 ... seconds). The periodic cycle leaves a path (TCP, or
// the two UDP domains) with a dead state and no observed-alive state to the
// recovery scheduler, which runs every min(RecoveryInterval, check
// interval) and probes only dead states whose cooldown is due; a state in
// deep backoff keeps being probed every CooldownMax, never given up. A dead
// state revives after RecoverySuccesses consecutive probe successes; the
// first one makes the cooldown due, so the second comes at the next
// recovery pass. Real traffic never revives a state, but a real success
// makes its recovery probe due. NotifyNetworkChange clears cooldowns and
// probe failure counts, primes dead states (one success revives them) and
// probes everything at once; WatchNetwork calls it on link, address and
// route changes, debounced by NetworkDebounce.
//
// A newly registered node (or a new incarnation of one) has a Grace during
// which failures of periodic, recovery, emergency and wake-up probes and of
// real traffic are recorded (history, observed) but do not count toward
// death; failures of probes an operator asks for (ProbeNow, Delay) count.
// (A state dead already, by forced probes, still backs off on them.)
//
// # Probes
//
// The TCP probe sends Options.TCPCheckMethod to the first TCP check URL
// through the node (a raw TCP connect when there is none); a success enters
// the TCP state of the family its Result names, a failure the family its
// FamilyError names (V4 when it names none) and updates liveness and
// cooldown only. The UDP probe, for nodes with Node.UDP when UDP check DNS
// servers are configured, sends one DNS query to the first through the
// node: a success records its RTT into both UDP domains and counts as a
// success of each, a failure adds one probe failure to each; TCP is never
// touched. A probe cancelled by Stop or its caller records nothing; one
// that ran out of CheckTimeout is a failure.
//
// # Score QUIC evidence
//
// Every UDP round (periodic, recovery, urgent or ProbeNow) of a Score leaf
// (SetScoreLeaves: the nodes some Score group can select, set again by the
// caller at every reload) also performs a real TLS-in-QUIC handshake with
// ALPN h3 through the node's packet path toward the first TCP check URL,
// when that URL is https and the prober is a QUICProber. A missing or
// non-https URL, a node that is not a Score leaf, or no UDP round (no UDP
// check server, a node without UDP) means no handshake. The handshake is a
// probe of its own: it takes a MaxConcurrentProbes token like the DNS
// query, runs beside it within the same CheckTimeout, and the round is
// recorded once both ended. Its outcome goes to Options.OnScoreQUIC (when
// it started, its duration) as Score's DataUdp probe quality, and nowhere
// else: it is no latency sample, no history entry, no Observer probe, and
// never touches TCP. A success rescues DataUdp when the DNS query of the
// same round failed: DnsUdp takes the failure alone, while DataUdp of the
// handshake's family counts a probe success without a sample (it stays
// alive, and a dead one revives after RecoverySuccesses such rounds); the
// skip-death rule then keeps DnsUdp alive too while DataUdp is. When both
// fail, both UDP domains fail as without the handshake.
//
// Per-group check_url states, keyed by (member tag, URL) and recorded under
// the member tag even when probed through a sub-group's current leaf, are
// TCP only with one state each: the same threshold, cooldown and
// two-success recovery, and the grace of the leaf a probe goes through. Their set is replaced by
// what Options.URLTargets returns on every cycle, so it holds only what the
// configuration names.
//
// Latency is a halving moving average of real samples: the first
// initializes it, then next = (previous + sample) / 2 (recent changes
// matter quickly without one jitter sample being authoritative). Each state
// keeps a history of its last HistorySize probe outcomes (a failure has a
// zero delay) with their clock times.
//
// # Strikes and the dial EMA
//
// Only real dials (ReportDial) feed strikes. Every second consecutive dial
// failure appends a synthetic SyntheticDelay placeholder to the TCP history
// (flagged, left out of the displayed history, the average and the last
// real sample) and adds one failure strike; a lone failure leaves nothing.
// Only a real dial success ends the streak, so a probe-alive but dial-dead
// node keeps accumulating strikes. Dial failures also count as real-traffic
// TCP failures.
//
// Each node keeps an EMA (α = 1/DialEMADivisor) of the latencies of fresh
// dials, pool hits excluded as they make no round trip. After DialEMAWarmup
// dials, a dial slower than max(min(2×EMA, EMA+SlowDialSlack),
// SlowDialFloor) is slow (the floor keeps a fast node's normal jitter, say
// 60→120 ms, from tripping it); SlowDials consecutive slow dials add one
// slow strike and fire an emergency TCP probe. The probe average is never
// touched by dial latencies.
//
// Strikes clear after max(strikes, 2) consecutive real successes that were
// not slow. Slow strikes also clear after max(slow strikes, 2) consecutive
// TCP probe successes counted from the strike: a false positive (a shifted
// target mix rather than node decay) heals once the emergency probe and the
// next one succeed. Failure strikes never clear by probes.
//
// # Runner
//
// Start runs a cycle at once and then every check interval (a cycle still
// running when the next is due makes that one skipped), the recovery
// scheduler, and urgent probes: emergency probes, the nodes of a sleeping
// group on its next real selection (Selected), everything on a network
// change. At most one probe per node and path is in flight from these, and
// at most MaxConcurrentProbes probes of every kind together. A node is
// probed periodically unless every group holding it sleeps (urltest-like)
// and has been idle for its idle timeout. Stop cancels and waits for every
// goroutine the engine started.
//
// # Values chosen here
//
// The specification names no probe concurrency bound.
// DefaultMaxConcurrentProbes is 32: half of the default dial admission
// budget (64), so probes never take more than half of the physical dials
// in flight, while 1,000 UDP-capable nodes at typical probe times (0.6 s
// for the two requests of a TCP probe, 0.2 s for a DNS query) still finish
// a cycle in about 25 s, within the 30 s interval.
// NetworkDebounce is 1 s: a link going up brings its addresses and routes
// within a few hundred milliseconds, so they make one notification, and
// the engine is never asked to probe everything more than once a second.
// Strikes have no cap beyond the arithmetic: the natural bound is that a
// demoted or dead node stops being dialed.
package health

import "time"

// Thresholds and timings of the specification.
const (
	// ProbeFailures is the consecutive probe failures that kill a state,
	// in every domain.
	ProbeFailures = 3
	// TrafficFailuresTCP, TrafficFailuresDNSUDP and TrafficFailuresDataUDP
	// are the consecutive real-traffic failures that kill a state of the
	// domain.
	TrafficFailuresTCP     = 10
	TrafficFailuresDNSUDP  = 3
	TrafficFailuresDataUDP = 50
	// RecoverySuccesses is the consecutive probe successes that revive a
	// dead state (one after a network change), and the least number of
	// successes that clear strikes.
	RecoverySuccesses = 2
	// CooldownMin and CooldownMax bound the exponential probe cooldown.
	CooldownMin = 5 * time.Second
	CooldownMax = 300 * time.Second
	// RecoveryInterval is the recovery scheduler's period (or the check
	// interval when shorter).
	RecoveryInterval = 5 * time.Second
	// Grace is the time a new node's non-forced failures do not count.
	Grace = 60 * time.Second
	// HistorySize is the probe history kept per node, domain and family.
	HistorySize = 100
	// SyntheticDelay is the delay of a dial-failure placeholder.
	SyntheticDelay = 10 * time.Second
	// DialFailuresPerStrike consecutive dial failures add a strike.
	DialFailuresPerStrike = 2
	// DialEMADivisor is 1/α of the dial-latency EMA; DialEMAWarmup dials
	// feed it before any is judged slow.
	DialEMADivisor = 8
	DialEMAWarmup  = 3
	// SlowDials consecutive slow dials add a strike and fire an emergency
	// probe; SlowDialSlack and SlowDialFloor shape the slow threshold
	// max(min(2×EMA, EMA+SlowDialSlack), SlowDialFloor).
	SlowDials     = 3
	SlowDialSlack = 500 * time.Millisecond
	SlowDialFloor = 250 * time.Millisecond
	// DelayConcurrency caps one DelayMany's tests in flight.
	DelayConcurrency = 10
	// RestoreMaxAge is the oldest persisted last real delay Restore uses.
	// The store writes LastReal every LastRealSaveInterval.
	RestoreMaxAge        = 24 * time.Hour
	LastRealSaveInterval = 60 * time.Second

	DefaultCheckInterval = 30 * time.Second
	DefaultCheckTimeout  = 5 * time.Second
	DefaultIdleTimeout   = 30 * time.Minute
	// DelayMethod is the method of delay tests; DefaultDelayURL the URL of
	// a delay test given none.
	DelayMethod     = "HEAD"
	DefaultDelayURL = "https://www.gstatic.com/generate_204"
)

// Values the specification does not name; see the package documentation.
const (
	DefaultMaxConcurrentProbes = 32
	NetworkDebounce            = time.Second
)
