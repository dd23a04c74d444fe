// Package serve is the in-process DNS service: it answers the DNS queries
// of flows routed to it (port-53 flows, when spec.DNS.Serve is set, reach
// the dns outbound, which hands them here) by asking an Exchanger, the
// resolvers behind it, or a FakeIP hook first.
//
// # One query
//
// Every message is handled the same way, whichever way it came:
//
//   - shorter than a header (12 bytes), or a response (QR set): no reply.
//     Replying to a response could start a loop between two DNS speakers;
//     common servers drop them too;
//   - longer than MaxQuerySize (4,096 bytes), or a header followed by bytes
//     that do not parse: FORMERR, the header alone with the query's ID,
//     opcode and RD bit;
//   - an opcode other than QUERY: NOTIMP;
//   - no question, more than one, or more than one OPT record: FORMERR;
//   - an EDNS version other than 0: BADVERS (RFC 6891 section 6.1.3);
//   - otherwise the FakeIP hook, when there is one, may answer; else the
//     Exchanger is asked, within Options.Timeout (DefaultTimeout, 5 s, the
//     resolvers' own default). A failure, a timeout or no message is
//     SERVFAIL.
//
// The reply carries the query's ID, RD and CD bits and its question exactly
// as the client wrote it (a cache may have answered a name in another
// case; some clients randomise case and compare), RA set. It carries an
// OPT record exactly when the query did (RFC 6891 section 7), the
// service's own: UDP size AdvertisedUDPSize (1,232, the DNS Flag Day 2020
// value), DO echoed; any OPT record of the Exchanger's answer is dropped.
// An extended rcode for a client without EDNS becomes SERVFAIL. Over UDP
// the reply is cut to the client's size, the OPT record's UDP size (never
// less than 512) or 512 without EDNS, with TC set (dns.Msg.Truncate), so
// the client retries over TCP; over TCP to 65,535 bytes.
//
// The service never modifies the message the Exchanger returns: a cache
// may hand out the one it keeps. It keeps copies of what it needs of the
// query before the Exchanger sees it, so the Exchanger may modify that.
//
// # Transports and bounds
//
// PacketLink is a netx.PacketLink for a UDP association: each datagram is
// a query, answered on a goroutine the link owns and waits for on Close,
// and attributed on return to the address it was sent to. Stream is a
// net.Conn speaking TCP framing. Each holds at most Options.MaxInFlight
// (DefaultMaxInFlight, 64) queries at once: a link drops datagrams beyond
// it (the client's retry is the right answer to overload, and a SERVFAIL
// would make it give up instead), a stream stops reading. A stream ends
// after StreamIdleTimeout (30 s) without a query, on a query longer than
// MaxQuerySize, and when a query does not arrive or its answer cannot be
// written within the query timeout; answers are written in query order
// (RFC 7766 allows either order; in order is simpler for every client).
// Nothing a client sends ends a link; only Close does.
//
// Stats counts queries, replies by rcode, drops, fake answers, failures
// and truncations, with atomics: reading them takes no lock.
package serve
