package serve

import (
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"switchyard/netx"
)

// The reply carries the query's ID, flags and question as the client wrote
// them, whatever the Exchanger's answer says.
func TestAnswerKeepsTheQuerysIDAndQuestion(t *testing.T) {
	s := New(fixed(1), Options{})
	q := new(dns.Msg)
	q.SetQuestion("WwW.ExAmple.ORG.", dns.TypeA)
	q.Id = 4242
	q.CheckingDisabled = true
	b, _ := q.Pack()
	out, err := s.Answer(context.Background(), b, netx.UDP)
	if err != nil {
		t.Fatal(err)
	}
	r := unpack(t, out)
	if r.Id != 4242 || !r.Response || !r.RecursionDesired || !r.RecursionAvailable || !r.CheckingDisabled {
		t.Fatalf("header: %+v", r.MsgHdr)
	}
	if len(r.Question) != 1 || r.Question[0].Name != "WwW.ExAmple.ORG." {
		t.Fatalf("question: %v", r.Question)
	}
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Fatalf("answer: %v", r)
	}
}

func TestMessagesThatGetAnErrorOrNoReply(t *testing.T) {
	s := New(fixed(1), Options{})
	good := mkQuery(t, 7, "a.test.", dns.TypeA, 0)
	withFlags := func(set uint16) []byte {
		b := append([]byte(nil), good...)
		binary.BigEndian.PutUint16(b[2:], binary.BigEndian.Uint16(b[2:])|set)
		return b
	}
	msg := func(edit func(m *dns.Msg)) []byte {
		m := new(dns.Msg)
		m.SetQuestion("a.test.", dns.TypeA)
		m.Id = 7
		edit(m)
		b, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tc := range []struct {
		name     string
		in       []byte
		noReply  bool
		rcode    int
		question bool // the reply echoes the question
		opt      bool // the reply carries an OPT record
	}{
		{name: "empty", in: nil, noReply: true},
		{name: "short", in: good[:11], noReply: true},
		{name: "a response", in: withFlags(flagQR), noReply: true},
		{name: "header and garbage", in: append(append([]byte(nil), good[:12]...), 0xff, 0xff, 0xff), rcode: dns.RcodeFormatError},
		{name: "truncated question", in: good[:len(good)-3], rcode: dns.RcodeFormatError},
		{name: "too long", in: append(append([]byte(nil), good...), make([]byte, MaxQuerySize)...), rcode: dns.RcodeFormatError},
		{name: "notify", in: msg(func(m *dns.Msg) { m.Opcode = dns.OpcodeNotify }), rcode: dns.RcodeNotImplemented, question: true},
		{name: "update", in: msg(func(m *dns.Msg) { m.Opcode = dns.OpcodeUpdate }), rcode: dns.RcodeNotImplemented, question: true},
		{name: "no question", in: msg(func(m *dns.Msg) { m.Question = nil }), rcode: dns.RcodeFormatError},
		{name: "two questions", in: msg(func(m *dns.Msg) {
			m.Question = append(m.Question, dns.Question{Name: "b.test.", Qtype: dns.TypeA, Qclass: dns.ClassINET})
		}), rcode: dns.RcodeFormatError},
		{name: "two OPT records", in: msg(func(m *dns.Msg) {
			m.SetEdns0(1232, false)
			m.Extra = append(m.Extra, m.Extra[0])
		}), rcode: dns.RcodeFormatError, question: true, opt: true},
		{name: "EDNS version 1", in: msg(func(m *dns.Msg) {
			m.SetEdns0(1232, false)
			m.IsEdns0().SetVersion(1)
		}), rcode: dns.RcodeBadVers, question: true, opt: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := s.Answer(context.Background(), tc.in, netx.UDP)
			if tc.noReply {
				if !errors.Is(err, ErrNoReply) || out != nil {
					t.Fatalf("got % x, %v; want no reply", out, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			r := unpack(t, out)
			if r.Id != 7 || !r.Response || r.Rcode != tc.rcode {
				t.Fatalf("id %d response %v rcode %s; want id 7, a response, %s", r.Id, r.Response, dns.RcodeToString[r.Rcode], dns.RcodeToString[tc.rcode])
			}
			if got := len(r.Question) == 1; got != tc.question {
				t.Fatalf("question echoed: %v, want %v", r.Question, tc.question)
			}
			if got := r.IsEdns0() != nil; got != tc.opt {
				t.Fatalf("OPT record: %v, want %v", got, tc.opt)
			}
		})
	}
}

// A notify's NOTIMP keeps its opcode: the client matches on it.
func TestNotImplementedKeepsTheOpcode(t *testing.T) {
	m := new(dns.Msg)
	m.SetNotify("zone.test.")
	b, _ := m.Pack()
	out, err := New(fixed(1), Options{}).Answer(context.Background(), b, netx.UDP)
	if err != nil {
		t.Fatal(err)
	}
	if r := unpack(t, out); r.Opcode != dns.OpcodeNotify || r.Rcode != dns.RcodeNotImplemented {
		t.Fatalf("opcode %d rcode %d", r.Opcode, r.Rcode)
	}
}

func TestExchangeFailuresAreServfail(t *testing.T) {
	for _, tc := range []struct {
		name string
		x    exchangeFunc
	}{
		{"error", func(context.Context, *dns.Msg) (*dns.Msg, error) { return nil, errors.New("upstream down") }},
		{"no message", func(context.Context, *dns.Msg) (*dns.Msg, error) { return nil, nil }},
		{"timeout", func(ctx context.Context, _ *dns.Msg) (*dns.Msg, error) { <-ctx.Done(); return nil, ctx.Err() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(tc.x, Options{Timeout: 20 * time.Millisecond})
			start := time.Now()
			out, err := s.Answer(context.Background(), mkQuery(t, 9, "a.test.", dns.TypeA, 0), netx.UDP)
			if err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Fatalf("took %v", d)
			}
			r := unpack(t, out)
			if r.Id != 9 || r.Rcode != dns.RcodeServerFailure || len(r.Question) != 1 {
				t.Fatalf("reply: %v", r)
			}
			if st := s.Stats(); st.Failed != 1 || st.Rcodes[dns.RcodeServerFailure] != 1 {
				t.Fatalf("stats: %+v", st)
			}
		})
	}
}

// An answer over the client's UDP size is cut to it with TC set; over TCP
// it is whole.
func TestTruncationHonoursTheClientsUDPSize(t *testing.T) {
	s := New(fixed(200), Options{}) // 200 A records: about 3.2 KB compressed
	for _, tc := range []struct {
		name    string
		edns    uint16
		network netx.Network
		limit   int
		tc      bool
	}{
		{"udp without EDNS", 0, netx.UDP, 512, true},
		{"udp EDNS 1232", 1232, netx.UDP, 1232, true},
		{"udp EDNS below 512", 100, netx.UDP, 512, true},
		{"udp EDNS 8192", 8192, netx.UDP, 8192, false},
		{"tcp", 0, netx.TCP, dns.MaxMsgSize, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := s.Answer(context.Background(), mkQuery(t, 1, "big.test.", dns.TypeA, tc.edns), tc.network)
			if err != nil {
				t.Fatal(err)
			}
			if len(out) > tc.limit {
				t.Fatalf("%d bytes, limit %d", len(out), tc.limit)
			}
			r := unpack(t, out)
			if r.Truncated != tc.tc {
				t.Fatalf("TC = %v, want %v", r.Truncated, tc.tc)
			}
			if !tc.tc && len(r.Answer) != 200 {
				t.Fatalf("%d answers, want all 200", len(r.Answer))
			}
			if tc.tc && len(r.Answer) == 0 {
				t.Fatal("a truncated answer keeps what fits")
			}
			if got := r.IsEdns0() != nil; got != (tc.edns > 0) {
				t.Fatalf("OPT record %v for a query with EDNS %d", got, tc.edns)
			}
		})
	}
}

// The reply's OPT record is the service's: present exactly when the query
// had one, DO echoed, whatever the Exchanger's answer carried.
func TestTheReplysOPTRecordFollowsTheQuery(t *testing.T) {
	x := exchangeFunc(func(_ context.Context, q *dns.Msg) (*dns.Msg, error) {
		r := answerA(q, 1)
		r.SetEdns0(512, false) // the upstream's, to be replaced
		return r, nil
	})
	s := New(x, Options{})
	for _, tc := range []struct {
		name string
		edns bool
		do   bool
	}{{"no EDNS", false, false}, {"EDNS", true, false}, {"EDNS and DO", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			m := new(dns.Msg)
			m.SetQuestion("a.test.", dns.TypeA)
			if tc.edns {
				m.SetEdns0(4096, tc.do)
			}
			b, _ := m.Pack()
			out, err := s.Answer(context.Background(), b, netx.UDP)
			if err != nil {
				t.Fatal(err)
			}
			r := unpack(t, out)
			opts := 0
			for _, rr := range r.Extra {
				if rr.Header().Rrtype == dns.TypeOPT {
					opts++
				}
			}
			if !tc.edns {
				if opts != 0 {
					t.Fatalf("%d OPT records in the reply to a query without EDNS", opts)
				}
				return
			}
			if opts != 1 {
				t.Fatalf("%d OPT records", opts)
			}
			opt := r.IsEdns0()
			if opt.UDPSize() != AdvertisedUDPSize || opt.Do() != tc.do {
				t.Fatalf("OPT: size %d do %v", opt.UDPSize(), opt.Do())
			}
		})
	}
}

// An extended rcode cannot reach a client without EDNS: it becomes SERVFAIL.
// With EDNS it goes through.
func TestExtendedRcodes(t *testing.T) {
	x := exchangeFunc(func(_ context.Context, q *dns.Msg) (*dns.Msg, error) {
		r := new(dns.Msg)
		r.SetRcode(q, dns.RcodeBadCookie)
		return r, nil
	})
	s := New(x, Options{})
	out, err := s.Answer(context.Background(), mkQuery(t, 1, "a.test.", dns.TypeA, 0), netx.UDP)
	if err != nil {
		t.Fatal(err)
	}
	if r := unpack(t, out); r.Rcode != dns.RcodeServerFailure {
		t.Fatalf("rcode %s without EDNS", dns.RcodeToString[r.Rcode])
	}
	out, err = s.Answer(context.Background(), mkQuery(t, 1, "a.test.", dns.TypeA, 1232), netx.UDP)
	if err != nil {
		t.Fatal(err)
	}
	if r := unpack(t, out); r.Rcode != dns.RcodeBadCookie {
		t.Fatalf("rcode %s with EDNS", dns.RcodeToString[r.Rcode])
	}
	if st := s.Stats(); st.Rcodes[dns.RcodeBadCookie] != 1 || st.Rcodes[dns.RcodeServerFailure] != 1 {
		t.Fatalf("stats: %+v", st)
	}
}

// One answer, handed out to many queries at once (a cache's), is never
// modified: -race would see the writes, and its fields stay as they were.
func TestTheExchangersAnswerIsNotModified(t *testing.T) {
	proto := new(dns.Msg)
	proto.SetQuestion("shared.test.", dns.TypeA)
	shared := answerA(proto, 100)
	shared.SetEdns0(4096, true)
	shared.Id = 999
	x := exchangeFunc(func(context.Context, *dns.Msg) (*dns.Msg, error) { return shared, nil })
	s := New(x, Options{})
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			edns := uint16(0)
			if i%2 == 0 {
				edns = 1232
			}
			network := netx.UDP
			if i%4 == 1 {
				network = netx.TCP
			}
			for range 20 {
				if _, err := s.Answer(context.Background(), mkQuery(t, uint16(i), "SHARED.test.", dns.TypeA, edns), network); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if shared.Id != 999 || shared.Truncated || len(shared.Answer) != 100 || len(shared.Extra) != 1 || shared.Question[0].Name != "shared.test." {
		t.Fatalf("the Exchanger's message changed: %v", shared.MsgHdr)
	}
	if opt := shared.IsEdns0(); opt.UDPSize() != 4096 || !opt.Do() {
		t.Fatal("the Exchanger's OPT record changed")
	}
}

// The Exchanger may modify the query it is given: the reply still carries
// the query as the client sent it.
func TestTheExchangerMayModifyTheQuery(t *testing.T) {
	x := exchangeFunc(func(_ context.Context, q *dns.Msg) (*dns.Msg, error) {
		r := answerA(q, 1)
		q.Id = 1
		q.Question[0].Name = "other.test."
		q.RecursionDesired = false
		q.Extra = nil
		return r, nil
	})
	out, err := New(x, Options{}).Answer(context.Background(), mkQuery(t, 77, "Mine.test.", dns.TypeA, 1232), netx.UDP)
	if err != nil {
		t.Fatal(err)
	}
	r := unpack(t, out)
	if r.Id != 77 || r.Question[0].Name != "Mine.test." || !r.RecursionDesired || r.IsEdns0() == nil {
		t.Fatalf("reply: %v", r)
	}
}

type fakeHook struct {
	calls atomic.Int32
}

func (h *fakeHook) Answer(q *dns.Msg) (*dns.Msg, bool) {
	h.calls.Add(1)
	if q.Question[0].Qtype != dns.TypeAAAA {
		return nil, false
	}
	r := new(dns.Msg)
	r.SetReply(q)
	return r, true
}

// The FakeIP hook answers first; what it leaves goes to the Exchanger.
func TestTheFakeIPHookAnswersFirst(t *testing.T) {
	var asked atomic.Int32
	x := exchangeFunc(func(_ context.Context, q *dns.Msg) (*dns.Msg, error) {
		asked.Add(1)
		return answerA(q, 1), nil
	})
	hook := &fakeHook{}
	s := New(x, Options{FakeIP: hook})
	out, err := s.Answer(context.Background(), mkQuery(t, 5, "a.test.", dns.TypeAAAA, 0), netx.UDP)
	if err != nil {
		t.Fatal(err)
	}
	if r := unpack(t, out); r.Id != 5 || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 0 {
		t.Fatalf("hook reply: %v", r)
	}
	if asked.Load() != 0 {
		t.Fatal("the Exchanger was asked a question the hook answered")
	}
	if _, err := s.Answer(context.Background(), mkQuery(t, 6, "a.test.", dns.TypeA, 0), netx.UDP); err != nil {
		t.Fatal(err)
	}
	if asked.Load() != 1 || hook.calls.Load() != 2 {
		t.Fatalf("exchanger asked %d, hook %d", asked.Load(), hook.calls.Load())
	}
	// A malformed query never reaches the hook.
	if _, err := s.Answer(context.Background(), mkQuery(t, 6, "a.test.", dns.TypeA, 0)[:14], netx.UDP); err != nil {
		t.Fatal(err)
	}
	if hook.calls.Load() != 2 {
		t.Fatal("the hook saw a malformed query")
	}
	if st := s.Stats(); st.FakeIP != 1 || st.Queries != 3 || st.Answered != 3 || st.Rcodes[dns.RcodeFormatError] != 1 {
		t.Fatalf("stats: %+v", st)
	}
}
