package serve

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/miekg/dns"

	"switchyard/netx"
)

// Exchanger answers one DNS query: the resolvers behind the service.
type Exchanger interface {
	// Exchange returns the answer to q. It returns promptly once ctx is
	// done. q belongs to the call: Exchange may modify it, and the service
	// reads nothing from it afterwards. The service never modifies the
	// returned message, so a cache may hand out one it keeps, as long as
	// nothing else modifies it either.
	Exchange(ctx context.Context, q *dns.Msg) (*dns.Msg, error)
}

// FakeIP answers some queries itself, with no real query (fake IPs).
type FakeIP interface {
	// Answer returns the reply to q and true, or false when the service is
	// to ask the Exchanger. q carries exactly one question; Answer must not
	// modify it. The service never modifies the reply.
	Answer(q *dns.Msg) (*dns.Msg, bool)
}

// Defaults of Options, and the service's fixed bounds.
const (
	// DefaultTimeout bounds one query's Exchange. It is the resolvers'
	// default per-query timeout (spec.DNS.Timeout): a client's own retry
	// timer (glibc: 5 s) gives up at about the same time.
	DefaultTimeout = 5 * time.Second
	// DefaultMaxInFlight is how many queries one packet link or stream
	// holds at once, answered or waiting to be read. A stub resolver has a
	// handful in flight (A and AAAA, a few names of one page); 64 leaves
	// room for a busy application and bounds what a flooding client costs:
	// 64 goroutines and 64 answers per association.
	DefaultMaxInFlight = 64
	// MaxQuerySize is the largest query answered. A query is a header, one
	// question (at most 259 bytes) and an OPT record with a few options; a
	// few hundred bytes. Anything longer is answered FORMERR (UDP) or ends
	// the TCP connection, so that no client makes the service hold large
	// buffers.
	MaxQuerySize = 4096
	// AdvertisedUDPSize is the UDP payload size the service's OPT record
	// advertises: the DNS Flag Day 2020 value, which fits any path MTU.
	AdvertisedUDPSize = 1232
	// StreamIdleTimeout ends a TCP connection on which no query began for
	// that long (RFC 7766 section 6.2.3 asks for an idle timeout on the
	// order of seconds; this matches common servers' 30 s).
	StreamIdleTimeout = 30 * time.Second
)

// Options configure a Service. The zero value is valid.
type Options struct {
	// Timeout bounds each query's Exchange; 0 means DefaultTimeout. A query
	// whose Exchange fails or times out is answered SERVFAIL.
	Timeout time.Duration
	// MaxInFlight bounds the queries one packet link or stream holds at
	// once; 0 means DefaultMaxInFlight. Over it, a link drops the datagram
	// (the client retries) and a stream stops reading until one is done.
	MaxInFlight int
	// Logger receives the service's debug lines; nil discards them.
	Logger *slog.Logger
	// FakeIP, when not nil, is asked first about every valid query.
	FakeIP FakeIP
}

// Service answers DNS queries in-process: over datagram links (PacketLink),
// TCP-framed streams (Stream), or one at a time (Answer). Safe for
// concurrent use; it owns no goroutine itself, only those of the links and
// streams it opened, each of which ends with its Close.
type Service struct {
	x           Exchanger
	fake        FakeIP
	timeout     time.Duration
	maxInFlight int
	log         *slog.Logger
	idle        time.Duration // StreamIdleTimeout; shorter in tests
	stats       counters
}

// New returns a service that asks x. It opens nothing.
func New(x Exchanger, opts Options) *Service {
	s := &Service{
		x:           x,
		fake:        opts.FakeIP,
		timeout:     opts.Timeout,
		maxInFlight: opts.MaxInFlight,
		log:         opts.Logger,
		idle:        StreamIdleTimeout,
	}
	if s.timeout <= 0 {
		s.timeout = DefaultTimeout
	}
	if s.maxInFlight <= 0 {
		s.maxInFlight = DefaultMaxInFlight
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s
}

// ErrNoReply is returned by Answer for a message that gets no reply at all:
// one too short to carry a header, or a response (QR set). Answering a
// response could start a loop between two DNS speakers, so such messages
// are dropped, as common servers do.
var ErrNoReply = errors.New("dns service: message gets no reply")

// Answer returns the reply to one query message, as the service would send
// it over network (netx.UDP: cut to the client's UDP size with TC set;
// netx.TCP: at most 65,535 bytes). Every message whose header parses gets
// a reply (FORMERR, NOTIMP, BADVERS, SERVFAIL or the answer) except a
// response, for which, as for a message shorter than a header, the error Is
// ErrNoReply.
func (s *Service) Answer(ctx context.Context, msg []byte, network netx.Network) ([]byte, error) {
	s.stats.queries.Add(1)
	r, why := s.answer(ctx, msg, network)
	if why != "" {
		return nil, fmt.Errorf("%w: %s", ErrNoReply, why)
	}
	out := append([]byte(nil), r.b...)
	r.release()
	return out, nil
}

// reply is a packed message; bp, when not nil, is the pooled buffer b lies
// in, to give back once b has been sent.
type reply struct {
	bp *[]byte
	b  []byte
}

func (r reply) release() {
	if r.bp != nil {
		netx.PutBuf(r.bp)
	}
}

// Header bits of a DNS message (RFC 1035 section 4.1.1).
const (
	headerLen  = 12
	flagQR     = 1 << 15
	flagRD     = 1 << 8
	opcodeMask = 0xF << 11
)

// answer answers one message; why is not empty when it gets no reply.
func (s *Service) answer(ctx context.Context, b []byte, network netx.Network) (reply, string) {
	if len(b) < headerLen {
		s.stats.dropped.Add(1)
		return reply{}, "shorter than a DNS header"
	}
	flags := binary.BigEndian.Uint16(b[2:])
	if flags&flagQR != 0 {
		s.stats.dropped.Add(1)
		return reply{}, "a response, not a query"
	}
	if len(b) > MaxQuerySize {
		return s.headerError(b), ""
	}
	m := new(dns.Msg)
	if err := m.Unpack(b); err != nil {
		if s.debugOn() {
			s.log.Debug("dns service: malformed query", "err", err)
		}
		return s.headerError(b), ""
	}
	q := keep(m)
	if m.Opcode != dns.OpcodeQuery {
		return s.reply(q, rcodeMsg(dns.RcodeNotImplemented), network), ""
	}
	if len(m.Question) != 1 {
		q.question = dns.Question{}
		return s.reply(q, rcodeMsg(dns.RcodeFormatError), network), ""
	}
	opts := 0
	for _, rr := range m.Extra {
		if rr.Header().Rrtype == dns.TypeOPT {
			opts++
		}
	}
	if opts > 1 { // RFC 6891 section 6.1.1
		return s.reply(q, rcodeMsg(dns.RcodeFormatError), network), ""
	}
	if opt := m.IsEdns0(); opt != nil && opt.Version() != 0 {
		return s.reply(q, rcodeMsg(dns.RcodeBadVers), network), ""
	}
	if s.fake != nil {
		if r, ok := s.fake.Answer(m); ok && r != nil {
			s.stats.fakeIP.Add(1)
			return s.reply(q, r, network), ""
		}
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	r, err := s.x.Exchange(ctx, m)
	cancel()
	if err == nil && r == nil {
		err = errors.New("no answer")
	}
	if err != nil {
		s.stats.failed.Add(1)
		if s.debugOn() {
			s.log.Debug("dns service: query failed", "name", q.question.Name, "type", dns.Type(q.question.Qtype).String(), "err", err)
		}
		return s.reply(q, rcodeMsg(dns.RcodeServerFailure), network), ""
	}
	return s.reply(q, r, network), ""
}

// query is what the service keeps of a query while it is answered: the
// Exchanger may modify the message itself.
type query struct {
	id       uint16
	opcode   int
	rd, cd   bool
	question dns.Question // echoed in the reply unless its Name is empty
	edns     bool         // the query carried an OPT record
	do       bool         // DNSSEC OK, echoed in the reply's OPT
	udpSize  int          // the largest UDP reply the client takes
}

// keep copies what the service needs of m, before anyone may modify it.
func keep(m *dns.Msg) query {
	q := query{id: m.Id, opcode: m.Opcode, rd: m.RecursionDesired, cd: m.CheckingDisabled, udpSize: dns.MinMsgSize}
	if len(m.Question) > 0 {
		q.question = m.Question[0]
	}
	if opt := m.IsEdns0(); opt != nil {
		q.edns = true
		q.do = opt.Do()
		if size := int(opt.UDPSize()); size > q.udpSize {
			q.udpSize = size
		}
	}
	return q
}

// rcodeMsg is an answer of an rcode and no records; reply makes it a
// reply.
func rcodeMsg(rcode int) *dns.Msg {
	return &dns.Msg{MsgHdr: dns.MsgHdr{Rcode: rcode}}
}

// headerError is the FORMERR reply to a query of which only the header is
// trusted: the header alone, with the query's ID, opcode and RD bit.
func (s *Service) headerError(b []byte) reply {
	flags := binary.BigEndian.Uint16(b[2:])
	return s.headerOnly(binary.BigEndian.Uint16(b), flags&(opcodeMask|flagRD), dns.RcodeFormatError)
}

// headerOnly is a reply of a header alone: id, the given bits (opcode,
// RD), QR and rcode.
func (s *Service) headerOnly(id, bits uint16, rcode int) reply {
	bp := netx.GetBuf(headerLen)
	out := (*bp)[:headerLen]
	clear(out)
	binary.BigEndian.PutUint16(out, id)
	binary.BigEndian.PutUint16(out[2:], flagQR|bits|uint16(rcode&0xF))
	s.count(rcode)
	return reply{bp: bp, b: out}
}

// reply packs r as the reply to q. r is not modified: the reply is a
// shallow copy whose header and question come from q and whose additional
// section is its own, with the service's OPT record when q carried one
// (RFC 6891: never otherwise). Over UDP it is cut to q's UDP size, over TCP
// to the 65,535 bytes of the framing.
func (s *Service) reply(q query, r *dns.Msg, network netx.Network) reply {
	out := *r
	out.Id = q.id
	out.Response = true
	out.Opcode = q.opcode
	out.RecursionDesired = q.rd
	out.RecursionAvailable = true
	out.CheckingDisabled = q.cd
	out.Zero = false
	out.Question = nil
	if q.question.Name != "" {
		out.Question = []dns.Question{q.question}
	}
	extra := make([]dns.RR, 0, len(r.Extra)+1)
	for _, rr := range r.Extra {
		if rr != nil && rr.Header().Rrtype != dns.TypeOPT {
			extra = append(extra, rr)
		}
	}
	if q.edns {
		opt := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
		opt.SetUDPSize(AdvertisedUDPSize)
		opt.SetDo(q.do)
		extra = append(extra, opt)
	} else if out.Rcode > 0xF {
		// An extended rcode needs an OPT record the client did not ask for.
		out.Rcode = dns.RcodeServerFailure
	}
	out.Extra = extra
	limit := dns.MaxMsgSize
	if network == netx.UDP {
		limit = q.udpSize
		out.Compress = true
		out.Truncate(limit) // leaves Compress off when it fits without
	} else {
		out.Compress = true
	}
	rep, err := pack(&out)
	if err == nil && len(rep.b) > limit {
		rep.release()
		out.Truncate(limit)
		rep, err = pack(&out)
	}
	if err != nil {
		if s.debugOn() {
			s.log.Debug("dns service: answer does not pack", "name", q.question.Name, "err", err)
		}
		if len(r.Answer)+len(r.Ns)+len(r.Extra) == 0 {
			// Not even a bare rcode packs: the header alone.
			bits := uint16(q.opcode&0xF) << 11
			if q.rd {
				bits |= flagRD
			}
			return s.headerOnly(q.id, bits, dns.RcodeServerFailure)
		}
		return s.reply(q, rcodeMsg(dns.RcodeServerFailure), network)
	}
	if out.Truncated {
		s.stats.truncated.Add(1)
	}
	s.count(out.Rcode)
	return rep
}

// pack packs m into a pooled buffer when it fits one of SmallBuf bytes.
func pack(m *dns.Msg) (reply, error) {
	bp := netx.GetBuf(netx.SmallBuf)
	b, err := m.PackBuffer(*bp)
	if err != nil {
		netx.PutBuf(bp)
		return reply{}, err
	}
	if len(b) == 0 || cap(b) != cap(*bp) || &b[0] != &(*bp)[0] {
		netx.PutBuf(bp) // packed into a buffer of its own
		return reply{b: b}, nil
	}
	return reply{bp: bp, b: b}, nil
}

func (s *Service) debugOn() bool {
	return s.log.Enabled(context.Background(), slog.LevelDebug)
}

// debug logs at debug level; callers whose arguments cost something to
// make check debugOn first.
func (s *Service) debug(msg string, args ...any) {
	if s.debugOn() {
		s.log.Debug(msg, args...)
	}
}
