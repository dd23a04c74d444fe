// Package warm keeps ready, within strict bounds, what the first flow
// through a proxy node would otherwise wait for: a connected (TLS
// completed) server connection for the protocols whose handshake can start
// on any fresh one, or the one session a node's flows share (a QUIC
// connection, a WireGuard tunnel, gRPC's HTTP/2 connection).
//
// # Node runtimes and ownership
//
// Each proxy node of the running configuration, by node identity and
// outbound version, has one Runtime: the handle on what the node's
// outbound reuses between flows (outbound.Warmer: its pool of bare
// connections, or its session slot) and two independent owner bits,
// OwnSelector and OwnUDP. A pass sets the bits it finds due; releasing one
// leaves the other, and only the release of the last one cools the node
// (Warmer.Cool: the pool purged, an unused session retired), which drains
// future reuse without cutting a flow. A reload that keeps a node's
// outbound (same identity, same version) keeps its runtime, bits and warm
// state included; a changed node gets a fresh runtime, and the old one is
// cooled.
//
// # The three mechanisms
//
// Startup preconnect: one pass when the manager starts (after the
// inbounds bind): the current pick of each group first, then the nodes in
// configuration order, bare-TCP-poolable nodes only (outbound.WarmPool),
// at most Config.Preconnect of them (preconnect = "auto" is 8, 0 is off).
// Each gets one connection deposited in its pool, left to the pool's idle
// bound: preconnect owns no bit. A node the same pass pins is warmed by
// the pin instead (the pin's first connection is the seed).
//
// Selector pin: every Selector group's TCP choice (its effective member's
// leaf, an unhealthy explicit choice included), deduplicated by node
// identity, owns OwnSelector: a pool keeps one connection (replaced by the
// pool as it expires at the idle bound the pool learns of its server, a
// found-dead one discarded and redialed by the pass), a session is kept
// established. A change of a group's effective
// member wakes the pass at once (Wake); otherwise a pass runs every
// PassInterval (10 s) and repairs what was lost, consumed or expired.
//
// UDP warm set (opt-in, Config.UDPWarmSet = N > 0): on every pass, each
// group's top min(N, 3) leaves with reusable UDP state (a session:
// Hysteria 2's QUIC connection, a WireGuard tunnel, gRPC's HTTP/2
// connection), for each address family in the group's UDP ranking, are
// gathered, deduplicated by node identity, re-ranked by their best rank
// and capped at 4 × N; they own OwnUDP and keep their session up. VLESS
// and VMess XUDP open one Mux connection per association, which no other
// association shares: they have no shared UDP carrier to keep, and a
// bare-TCP pool is no UDP state. At most MaxAttempts (4) warm attempts
// of any mechanism run at once.
//
// # Bounds
//
// Every attempt runs under an establishment of the running generation
// (Source.Begin: its dial admission and its absolute deadline). Passes
// and attempts run on goroutines the manager owns; Close stops them and
// waits. The retained set is at most the number of Selector groups plus
// 4 × N nodes; a pool holds at most connpool.DefaultSize connections, and
// a kept one, while it learns its idle bound, one sentinel more.
//
// # Observable
//
// States reads the published runtimes (owner bits, pooled connections
// and the pool's idle bound, session up) without a lock a pass or an attempt holds. Each attempt that
// opened something or failed is logged at debug level with the node, the
// mechanism, the outcome and the duration.
package warm
