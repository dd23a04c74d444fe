// Package dns resolves names for the rest of the process and answers the
// queries of the in-process DNS service: clients of the five server kinds,
// a cached resolver over a list of servers, a router that picks a resolver
// (or a block answer) per name by the DNS rules, and Build, which makes
// them all from a spec.DNS. Messages are github.com/miekg/dns values; this
// package parses no DNS bytes itself.
//
// # What is asked of whom
//
// The caller (the supervisor) gives Build an Env: the Direct Dialer (the
// socket policy: PolicyDialer over its netx.Dialer), the Routed Dialer (a
// DialContext whose "udp"/"tcp" connections are flows through the route
// table; nil means Direct), optionally a bootstrap resolver, a logger and,
// for tests, root CAs and a clock. Every query socket is opened through
// one of the two dialers: servers and pre_proxy (and the bootstrap) are
// asked through Direct, through_proxy and, in split mode, the rules'
// servers through Routed. The "system" server is the exception: it is
// net.DefaultResolver, whose sockets are the operating system's.
//
// The Set that Build returns gives:
//
//   - Servers(): for outbound.Deps.Servers — the proxy servers and
//     endpoints the outbounds dial. pre_proxy (or servers). The DNS rules
//     do not apply: a proxy server's name comes from the configuration.
//   - Destinations(): for outbound.Deps.Destinations — the destinations
//     this process connects to itself (direct, inside WireGuard). A Router:
//     through_proxy (or servers) with the DNS rules.
//   - Exchanger(): for the DNS service. The names local clients ask are
//     destinations, so it is the same router as Destinations().
//   - Stats(), Flush(), and Close(), which the owner calls when the DNS
//     spec is replaced: it ends the exchanges in flight, waits for their
//     goroutines and closes kept connections.
//
// Both resolvers implement netx.Resolver and netx.TTLResolver. LookupIP
// returns a slice the caller owns (netx.Resolve reorders it in place);
// AppendIP copies into the caller's storage and costs no allocation on a
// cache hit.
//
// # Resolving
//
// A resolver asks its servers in order, each for at most the timeout
// (spec Timeout, DefaultTimeout 5 s), until one gives a usable answer:
// anything but SERVFAIL, REFUSED and the other error codes (NXDOMAIN is an
// answer). A server whose exchange failed is asked after the others for
// failurePenalty (30 s), so a dead first server costs one timeout, not one
// per question. UDP queries to one server address share one connected
// socket (see udpmux.go): a reader goroutine hands each answer to the
// exchange waiting on its random ID, at most maxUDPWaiters at once, and
// the socket is closed after udpIdleTimeout (30 s) unused or on its first
// error. A UDP query is sent again every udpRetransmit (1 s) until
// its deadline, and a truncated UDP answer is asked again over TCP of the
// same server. Concurrent identical questions (name, type, class, DO and
// CD bits) share one exchange, which runs on a goroutine the resolver owns
// so that a caller giving up does not fail the others; at most maxFlights
// (1,024) questions are in flight per resolver, more wait. The upstream
// query is the question alone with the resolver's EDNS (1,232 bytes, the
// size that avoids fragmentation) and a fresh random ID (0 for DoH,
// RFC 8484 4.1); answers that do not match the ID and question are ignored.
//
// LookupIP asks A and AAAA at once and returns both, IPv4 first, unmapped;
// its TTL is the smaller of the two. NXDOMAIN is an error wrapping
// ErrNXDomain, NODATA no addresses and no error (TTL: the SOA's negative
// TTL), SERVFAIL and the like ErrServerFailure; a name a block rule
// matches is an error wrapping ErrBlocked.
//
// # Servers
//
// ParseServer reads "system", "udp://host[:53]", "tcp://host[:53]",
// "tls://host[:853]" (DoT, RFC 7858) and "https://host[:443][/dns-query]"
// (DoH, RFC 8484: POST application/dns-message over one HTTP/2 connection
// per server, kept and multiplexed). TLS is verified with the system roots
// (Options.RootCAs in tests), the URL's host being the server name. A host
// given by name is resolved once by the bootstrap resolver; after a
// failure queries move to the next address, and after the last the name
// is resolved again. TCP and TLS streams are kept for the next query (two
// per server, 10 s idle). The system server answers A and AAAA with the
// OS resolver and netx.DefaultTTL, other types with NOTIMP.
//
// # Cache
//
// One cache per Set, shared by its resolvers and keyed by question and by
// resolver, holds at most CacheSize entries (DefaultCacheSize 4,096), the
// least recently used going first. An answer is kept for its smallest
// TTL, a negative one (NXDOMAIN, NODATA) for the smaller of its SOA's TTL
// and minimum (RFC 2308 5); one without an SOA, a truncated one and a
// server failure are not kept. TTLs are clamped to [MinTTL, MaxTTL]
// (defaults 0 and 24 h, beyond which RFC 2308 found TTLs problematic), in
// the entry and in the records it serves, and served TTLs are lowered by
// the entry's age.
package dns
