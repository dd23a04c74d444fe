// Package group resolves groups — selector, urltest, fallback,
// loadbalance and score choosers over outbounds, balancers and other groups — to the
// one leaf outbound each flow (each packet, for UDP) goes to.
//
// # Model
//
// A Manager is one configuration's groups, built whole by New and never
// changed in shape: members, finals, the cut edges and every table are
// sized there. The plane holds each group's chooser target (Target); its
// Choose walks the group for the query's network and health family and
// returns a leaf target. What moves at run time lives in atomics beside
// the shape: a Selector's choice per network, a URLTest's cached winner
// per network and family, a Fallback's pin per network and family, a
// LoadBalance's cursor per network. Selection takes no lock and allocates
// nothing: the walk keeps the groups it is inside in a fixed array of
// plane.MaxGroupDepth indices, and a URLTest re-ranks by one scan of its
// members without scratch.
//
// A member is an outbound (a Leaf the integrator gives, with its NodeID,
// its UDP capability and whether it is a terminal block), a balancer (its
// chooser target) or a sub-group. A sub-group contributes exactly one
// candidate: the leaf its own policy picks for the same network and
// family, or its final's when it has no pick; the parent ranks or pins
// that candidate as the member. The walk is bounded by
// plane.MaxGroupDepth groups (the group a route names is the first) and by
// a per-walk visited set; a member or final deeper than the bound yields
// nothing (reason too_deep), so a chain of nine nested groups is refused
// cleanly and New warns about it. New also runs a depth-first search over
// group edges (members, then the final, in configuration order) and cuts
// every edge that closes a cycle, with a warning it returns and logs; a
// cut member stays listed (NodeNames) and is excluded as "cut cycle"; a
// cut final is a refusal.
//
// # Liveness filter
//
// TCP: a leaf is eligible when Health.Alive(node, TCP, family). UDP: a
// leaf that cannot carry UDP (Leaf.UDP false) is excluded first, before
// any health evidence, then Health.UDPEligible decides. A block leaf is
// terminal: eligible for both networks and never filtered. A group with a
// check_url (not a Selector) also requires, for TCP, Health.URLAlive(member
// tag, check_url) of the member: that state is TCP-only and removes the
// member only from groups using that URL. Query.Family is the health
// family (the family of the connection to the proxy server). When a group
// finds nothing for IPv6 it first takes its pick over IPv4 paths, then its
// final.
//
// A balancer member is always eligible: the balancer owns its members'
// health (its TCP probe) and always yields a leaf, which the groups do not
// know before asking. A real selection asks it (Resolve with the query, so
// a UDP association keeps its member through Query.Prefer) and records its
// tag in the chain before its leaf's; ranking, counting and introspection
// do not ask it (it would move its round robin), so a balancer member
// ranks as unmeasured without strikes in a URLTest, counts alive for
// every domain in connectivity, and is left out of delay tests.
//
// # Policies
//
// Selector: TCP and UDP have separate runtime choices. The effective
// member is the runtime choice, else the configured default, else the
// first declared member, whatever their health; only a missing or
// non-member choice falls through. An ineligible chosen member goes only
// to the explicit final or to the TCP last resort below; otherwise the
// plan is empty and the flow is refused — never an unchosen sibling.
// Select writes TCP, UDP or both (a Clash write: both); a name binds the
// first declared member with that tag. OnPersist is called for each
// network whose stored choice changed; when the group interrupts,
// OnInterrupt is called for the old effective member of each network
// whose effective member changed, and Select returns the sum of what they
// closed after they returned. Clear drops the runtime choice of TCP, UDP
// or both (the effective member is the default again), persisting ""
// and interrupting as Select does. A Selector ignores check_url, with a
// warning.
//
// URLTest: the lowest halving moving average wins, separately for TCP and
// UDP and per family. TCP ranks by Health.Latency(TCP), or by the
// (member tag, check_url) URLLatency when the group has a check_url. UDP
// ranks by the DataUDP average, else the DNSUDP one; when no eligible
// candidate has either for the family, UDP mirrors the TCP ranking (among
// the UDP-eligible candidates). A sub-group member is measured through the
// leaf it picks at ranking time, under the sub-group's own tag for
// check_url. A candidate carrying strikes (Health.Strikes of its leaf)
// ranks below every candidate without; members never measured rank after
// measured ones, in declaration order; with nothing measured the first
// eligible member wins. The effective tolerance is max(tolerance, 1ms):
// the incumbent stays while best + tolerance >= the incumbent's current
// average, read again at each ranking, unless it carries strikes. The
// winner is cached per (network, family) with the Health.Epoch and the
// Manager's generation (moved by choice writes, migrations and
// NodeChanged) it was ranked at, and re-ranked lazily by the first
// selection that sees either move, single-flight behind an atomic flag;
// concurrent selections use the cached winner meanwhile (the first
// eligible member when none was ranked yet), and a cached winner that is
// no longer eligible gives way to the first eligible member. A change of
// winner interrupts the old one when the group interrupts: the switch is
// queued (InterruptQueue deep, a switch beyond it is logged and dropped)
// to the Manager's worker, which calls OnInterrupt off the selecting
// goroutine; Close stops it. Choose returns a single leaf for every plan;
// a URLTest route target with no eligible member measured for a UDP
// flow's family (no DataUdp, DnsUdp or TCP average) also names every
// eligible leaf, strikes last, to prepare at once (ColdCandidates, the
// cold UDP preparation of package coldudp), rechecks the winner
// (ColdEligible) and, while it stays unmeasured, keeps the association's
// prepared leaf (Query.Prefer) rather than its unmeasured first pick. Retry
// is the one retry round of a URLTest setup failure: the latency-ordered
// top three (RetryCandidates) eligible leaves of the innermost URLTest on
// the flow's chain, the failed leaf excluded.
//
// Fallback: the first eligible member in declaration order is pinned,
// separately per network and family, and stays pinned while it is
// eligible; recovery of an earlier member does not fail back. The pin
// records since when (Explain). When the pin moves away from a member and
// the group interrupts, the old member's flows are interrupted as for a
// URLTest switch (the spec is silent; a pin only moves when its member
// died).
//
// LoadBalance: round robin over the eligible members in declaration
// order: the cursor of the network (TCP and UDP each have one, atomic)
// advances by one per selection and picks the k-th eligible member. For
// UDP, a member whose leaf is Query.Prefer (the leaf the association
// already uses) is kept while eligible, so an association does not hop
// nodes per packet. Rotation never interrupts.
//
// Score: the process's Score engine (package score, Options.Score) ranks
// the group's candidates for the flow's target (score.go). The candidates
// are the members through the liveness filter in declaration order: a
// leaf member is its own (shown ineligible when the filter excludes it,
// so the engine counts it), a sub-group the leaf its own policy picks,
// keyed by the sub-group's tag; a member with no pick, a leaf without a
// node identity and a balancer are none (New refuses a balancer member).
// The target family (the scoring bucket, not the health family) is the
// destination IP's family, IPv4 for a domain and for targetless work. A
// real selection ranks authorized and puts the chosen plan's attempt on
// the query (plane.Query.Attempts) for the data path to begin or release;
// the chosen member is then resolved in the walk's own mode, so a Score
// sub-group ranks and adds its own attempt: every Score group a walk
// traverses attributes the leaf's outcome. When the sub-group serves a
// different leaf than the one the parent ranked, the parent's attempt is
// released (the flow goes unscored there). Every quiet walk (a ranking,
// Explain, Groups, SelectionChain, connectivity, warm-up) and a query
// that only asks (Query.Peek) ranks with Request.Peek: no attempt, counter
// or reservation; Groups' now for a Score group is that readonly pick for
// a targetless TCP flow, the aggregate winner. The candidate rows come
// from a sync.Pool, so a selection allocates none of its own. Retry on a
// chain whose innermost URLTest-or-Score group is a Score group is that
// group's one sequential different leaf: the walk again from the route's
// group with the failed node excluded in every Score group (Query.Exclude,
// Query.Retry), held only when it reaches that Score group by the primary's
// path and yields another leaf; never after a retry or for a block. The
// TCP last resort of a Score group enters its serving pool as a
// last-resort rank. The supervisor configures the engine with
// ScoreGroups (each group's UUID, member count and reachable leaves at
// their incarnations) through ConfigureScore as it publishes the Manager;
// a Manager given no engine makes and configures its own. ScoreStats are
// the engine's counters named by this configuration's groups.
//
// # Finals and the last resort
//
// A group with no eligible pick follows its final — an outbound (not
// filtered: it is the user's explicit way out), a balancer or a group,
// resolved by the same bounded walk, recorded in the chain. A missing or
// cut final is a refusal. A group with no final whose leaves, through the
// current Selector TCP choices (sub-groups' finals included), are exactly
// one leaf that TCP liveness excludes serves that leaf for TCP anyway: its
// health stays dead, a real dial can prove recovery, and no other member
// or direct is used. The chain is the walk to it through those choices.
// UDP keeps normal exclusion. It is logged as a warning at most once per
// LastResortWarnEvery (60 s) per group. The last resort belongs to the
// group a walk resolves (the route's group or a final), not to a sub-group
// asked for its member's candidate: a sub-group whose only leaf is dead is
// no candidate of its parent.
//
// # Connectivity
//
// Each group has a slot per domain (TCP, DNSUDP, DataUDP) and family: the
// OR of every leaf reachable through members and finals (every member, not
// only a Selector's choice; UDP domains only for leaves that can carry
// UDP; a block leaf and a balancer count alive), plus alive for TCP when
// the group has no final and exactly one leaf through the current
// choices. NodeChanged recomputes every group reaching the node and calls
// OnConnectivity for the slots that changed; a Select recomputes every
// group. One caller at a time publishes (the others mark what changed and
// return), so the callbacks come in order without a lock held across
// them. A reload calls new.PublishFailOpen(old) (every slot of both
// layouts alive) before publishing the new plane and
// new.PublishConnectivity() (the exact snapshot of every slot) after.
//
// # Reloads and identity
//
// ids are the groups' identities (UUID and creation time), kept by the
// supervisor while a group's name is unchanged; a group missing from ids
// gets a fresh random one. Migrate carries Selector runtime choices per
// network by member identity: a leaf's NodeID (its tag when it has no
// node), a sub-group's Identity.ID, a balancer's tag; a node removed and
// added back under a new NodeID is not retargeted. Automatic picks
// (URLTest winners, Fallback pins, cursors) are not carried. Migrate marks
// the old Manager replaced: Select on it fails with ErrReplaced, so a
// write is never acknowledged on a replaced Manager (see Migrate for the
// lock the supervisor holds). Restore sets persisted choices by name at
// start.
//
// # Explain
//
// Explain gives every candidate with its exclusion (Exclusion codes:
// dead, no_udp, udp_dead, check_url_dead, cut_cycle, too_deep, cycle,
// no_pick, not_chosen, each with a sentence such as "dead on tcp4") and
// the outcome with a Reason code and a sentence: chosen ("chosen by
// hand"), default, first_member, lowest_average ("lowest average 42ms
// against the incumbent's 148ms beyond 50ms tolerance"), within_tolerance
// ("lowest average 42ms against the incumbent's 48ms within 50ms
// tolerance"), unmeasured, pinned ("pinned by fallback since 10:02:05"),
// round_robin, ipv4_path, final, last_resort ("last resort: the only
// leaf, dead") and refused, with the latencies it compared.
package group
