// Package probe measures one node through its own outbound: the health
// prober (health.Prober) that the health engine calls for a node's TCP
// and UDP states. Every measurement is disposable: it opens a fresh
// connection or packet link through the node, measures, and closes it
// before returning. It keeps nothing between calls and starts no goroutine
// that outlives a call (quic-go's, under the QUIC probe, end as it closes
// its connection and transport).
//
// # HTTP probe (TCP with a URL)
//
// The URL is http or https (DefaultURL, https://www.gstatic.com/generate_204,
// is what a caller passes for an empty delay-test URL). The request is built
// from it without decoding it: the authority sent (Host, :authority) is the
// host as written with the port only when it is not the scheme's default,
// never the credentials; the fragment is left out; the raw path and query
// are sent byte for byte, dot segments and percent-encoding kept; an empty
// path is "/", and a query-only URL asks for "/?query". Spaces, controls and
// non-ASCII bytes must be percent-encoded; the path and query are at most
// 8 KiB, so a request always fits one write and one HTTP/2 frame.
//
// The node is asked for a stream to the URL's host and port (the node
// resolves a name). Over https the server's certificate is verified
// (Options.RootCAs, else the system roots; the host is the server name) and
// ALPN offers h2 and http/1.1: HTTP/2 when the server picks h2, HTTP/1.1
// otherwise. Plain http is HTTP/1.1.
//
// Two requests go on that one connection: a HEAD warm-up, then the
// configured method (HEAD or GET; "" is HEAD). Both final responses must
// carry a valid status from 200 to 499: a 404 answers, a 5xx does not. The
// RTT reported is the second request's, from its write to the end of its
// final response head: it excludes the proxy dial and handshake, the target
// TLS handshake, the HTTP/2 startup, and the first round, which may carry
// the node's own connect to the target. Response bodies are never read:
// the warm-up is HEAD, which has none, and the connection is closed as soon
// as the second head is in, which also ends a GET's body.
//
// Informational (1xx) heads are consumed before the final one, except 101
// Switching Protocols: a probe has no protocol to switch to, so 101 fails.
// The heads of one request are bounded by MaxHead, 16 KiB. Over HTTP/1 the
// bound counts every byte of the response from its first to the line feed
// of the final head's empty line, informational heads included: a head of
// exactly 16384 bytes passes, 16385 fail. The bound is the read buffer, so
// a server cannot make the probe hold more. Over HTTP/2 it is the
// SETTINGS_MAX_HEADER_LIST_SIZE the probe advertises and enforces, counted
// as HTTP/2 counts header lists (name, value and 32 bytes per field), and
// the lists of one request's informational and final heads together.
//
// HTTP/1 heads are read strictly: "HTTP/1.x NNN[ reason]", fields with a
// token name right before the colon, no control characters, lines ending
// in CRLF or LF, no bare CR; obsolete line folding after a field is taken
// as part of it. A final head with "Connection: close" (or an HTTP/1.0 one
// without keep-alive) ends the probe with the warm-up's sample, since the
// server will not read a second request. Bytes after a HEAD response's
// head belong to the next response: a server that sends a body to HEAD
// fails the second round.
//
// HTTP/2 runs on the framer of golang.org/x/net/http2, on the probe's one
// goroutine. The probe's SETTINGS disable push (and allow no
// server-initiated stream) and cap the header list; it then waits for the
// server's SETTINGS, which must be the server's first frame, and
// acknowledges them. At most two streams are opened (1 and 3), one per
// request, each HEADERS with END_STREAM. Later SETTINGS are acknowledged and
// PINGs answered. The probe's own detections (DATA or HEADERS on a stream it
// did not open, DATA before a head, PUSH_PROMISE, a head without exactly
// one valid :status or with a request pseudo-header, an informational head
// ending its stream, a header list over the cap) and the framer's (frame
// size, hpack, field validity) are ErrProtocol or ErrHeadTooLarge and end
// the probe connection at the first one: a later reset by the server
// cannot turn rejected headers into a success. Late frames of the warm-up
// stream during the second round are ignored. The probe never cancels a
// stream and keeps none: every end of a round, success or failure, is the
// end of the connection, so no record of cancelled streams is needed.
//
// A second round that fails in transport may return the validated warm-up
// sample instead. Over HTTP/1 that is any write or read failure, the
// request budget included, before any byte of the second response arrived;
// a partial or invalid head fails. Over HTTP/2 it is only the server's
// refusal: a GOAWAY with NO_ERROR whose last stream is below the second
// one, or RST_STREAM REFUSED_STREAM before any head on it; any other reset,
// an error GOAWAY, a closed connection or the budget fail. The probe's
// context ending is never a transport failure: a cancelled or expired
// probe fails.
//
// # Raw connect probe (TCP with url "")
//
// The probe connects to Options.Server, the node's own TCP server (the
// outbound's ProbeTarget), with Options.DialTCP (the socket policy's
// dialer; a plain net.Dialer when nil), and reports the time the connect
// took; a name is resolved by DialTCP, inside that time. Nothing goes
// through the node. A node without a TCP server to connect to (WireGuard,
// Hysteria 2, direct) gets an HTTP probe of DefaultURL through itself with
// HEAD instead of a failure: a mihomo user expects every node to report a
// delay, and a refusal would mark such nodes dead forever.
//
// # UDP probe
//
// The probe opens the node's packet path toward the DNS server (port 53
// when none is given) and sends one query: a random ID, RD set, one
// question, A IN for DNSName (33 bytes). The first datagram whose ID
// matches, that is a response (QR) to a standard query and whose first
// question, when it has one, is the probe's counts as the answer, whatever
// its RCODE or TC bit: the resolver answered through the node. Any other
// datagram is ignored. The RTT runs from the send to that answer. The link
// is closed on return; its closing is also what ends the wait at the
// budget, since a PacketLink has no deadline.
//
// # QUIC probe (the Score QUIC evidence)
//
// QUIC takes an https URL and opens the node's packet path toward its host
// and port (the node resolves a name), then performs a TLS 1.3 handshake in
// QUIC (quic-go) offering only ALPN h3, with the URL's host as the server
// name and the certificate verified as the HTTP probe verifies it
// (Options.RootCAs, else the system roots). The packet link becomes a
// net.PacketConn to that one peer: a goroutine of the probe reads the link
// so that reads honour QUIC's deadlines, and ends with it. The RTT runs
// from the first Initial to the client's handshake completion, so the
// opening of the packet path is not part of it. Before closing (H3_NO_ERROR)
// the probe waits for the server's confirmation of the handshake
// (HANDSHAKE_DONE), so its Finished is never dropped by the close and the
// server completes its side; a server that does not confirm within the
// budget still leaves the probe a success, since its handshake answered.
// A server that picks another protocol, a certificate that does not
// verify, or a path that carries nothing fail. Nothing is requested: the
// connection carries no HTTP/3 request.
//
// # Budgets
//
// Each phase has its own budget (Timeouts): the dial through the node, or
// the raw connect (Dial, default 10 s, the connect timeout); the target TLS
// handshake (TLS, 10 s); the HTTP/2 startup (HTTP2Startup, 5 s); each
// request (Request, 5 s: its write and its heads) and the wait for the DNS
// answer. The QUIC probe opens its packet path within Dial and completes
// its handshake, and the wait for its confirmation, within TLS. A phase ends at its budget or at the probe context's deadline,
// whichever is first; every read and write of a phase runs under that
// deadline, and the context's cancellation wakes it at once. The caller's
// context is the probe's total bound.
//
// # Address family
//
// A Result and a FamilyError name the address family of the connection to
// the node's server. It is the first known of: the conn's or link's own
// report (FamilyReporter), the Dialer's report (FamilyReporter), the
// stream's remote address (a proxy client's stream is its socket to the
// server, or wraps it), the IP of Options.Server. When none is known the
// Result says V4 and a failure is a plain error, not a FamilyError. A
// raw connect takes the family of the socket it connected.
package probe
