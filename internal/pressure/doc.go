// Package pressure detects sustained carrier pressure on a Score-bound
// runtime's switchyard-to-proxy carrier: TCP RTT or retransmission pressure
// on the proxy socket (Linux TCP_INFO), and QUIC RTT or loss pressure on a
// Hysteria 2 connection (the QUIC stack's connection statistics).
//
// The producer side is three pieces:
//
//   - a Window per carrier turns successive cumulative Counters into
//     interval Samples: an interval is judged once it spans at least 1 s;
//     one longer than 10 s, without fresh ACK progress, or with less than
//     4 KiB of payload progress and fewer than 32 QUIC DATAGRAM frames is
//     unknown and proves nothing;
//   - the Samplers that read the counters: TCPCarriers for the physical
//     proxy sockets of one runtime (TCP_INFO), and a Source over a
//     CounterSource such as a Hysteria 2 outbound, whose CarrierCounters
//     read its QUIC connection;
//   - a Monitor per runtime, with one slot per actual socket family, that
//     trains an RTT baseline on four active samples and fires an episode
//     after three consecutive pressured intervals (RTT at least 1.5 times
//     the baseline and 20 ms above it; or send loss: at least 32
//     transmissions, three retransmitted/lost packets, positive lost bytes
//     and a 5 % count ratio). Two qualified normal intervals rearm an
//     episode; a slot publishes at most once per 30 s; a hint expires 60 s
//     after its publication, and reads never refresh it.
//
// The runtime owner calls its sources from its existing heartbeat (Beat is
// the one process-wide periodic pass when no heartbeat exists) and hands
// the samples of one pass to Monitor.Observe. Readers (the Score engine,
// the API) call Monitor.Hint or Monitor.Latest, which read one atomic
// snapshot. Monitor.Fence, on reload, fences every prior episode.
//
// A hint is a comparison-freshness question for the owner's node, nothing
// more: it carries no carrier or target identity, and it never changes
// utility, qualification, failure counts, health or flows.
//
// Wiring a runtime takes a few lines. One Monitor per runtime and carrier:
//
//	set := pressure.NewTCPCarriers(0)         // a TCP proxy runtime
//	d := *deps.Dialer                          // the runtime's own dialer copy
//	d.Carriers = set                           // every proxy socket it connects
//	mon := &pressure.Monitor{}
//	remove, err := beat.Add(set, mon, onHint) // or the owner's heartbeat calls
//	                                           // mon.Observe(at, set.Sample(at)...)
//
// A Hysteria 2 runtime passes pressure.NewSource(out) instead of a
// TCPCarriers: its CarrierCounters read the shared QUIC connection. On
// reload the owner calls mon.Fence(now); a replaced runtime drops its
// Monitor and removes its registration. Only the networks the carrier
// carries receive the hint: a Shadowsocks runtime's TCP carrier says
// nothing of its native UDP.
//
// TCP_INFO is Linux's: elsewhere a TCP carrier yields no counters, so its
// intervals stay unknown and it never produces a hint.
package pressure
