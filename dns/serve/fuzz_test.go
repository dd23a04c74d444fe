package serve

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/miekg/dns"

	"switchyard/netx"
)

// FuzzAnswer: any bytes get no reply or a bounded reply that parses, with
// the query's ID, and never a panic.
func FuzzAnswer(f *testing.F) {
	f.Add(mkQuery(f, 1, "a.test.", dns.TypeA, 0))
	f.Add(mkQuery(f, 2, "big.test.", dns.TypeA, 1232))
	f.Add(mkQuery(f, 3, "x.test.", dns.TypeAAAA, 100))
	f.Add([]byte{0, 1, 0x28, 0, 0, 1, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{1, 2, 3})
	x := exchangeFunc(func(_ context.Context, q *dns.Msg) (*dns.Msg, error) {
		switch q.Question[0].Qtype {
		case dns.TypeA:
			return answerA(q, 100), nil
		case dns.TypeTXT:
			return nil, errors.New("fails")
		}
		// Echo the query as the answer, records and all.
		r := q.Copy()
		r.Response = true
		return r, nil
	})
	s := New(x, Options{})
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, network := range []netx.Network{netx.UDP, netx.TCP} {
			out, err := s.Answer(context.Background(), b, network)
			if err != nil {
				if !errors.Is(err, ErrNoReply) {
					t.Fatalf("error %v", err)
				}
				if len(b) >= headerLen && b[2]&0x80 == 0 {
					t.Fatalf("no reply to a query with a header: %v", err)
				}
				continue
			}
			if len(out) < headerLen || len(out) > dns.MaxMsgSize {
				t.Fatalf("%d bytes", len(out))
			}
			if binary.BigEndian.Uint16(out) != binary.BigEndian.Uint16(b) || out[2]&0x80 == 0 {
				t.Fatalf("reply header % x to query header % x", out[:4], b[:4])
			}
			r := new(dns.Msg)
			if err := r.Unpack(out); err != nil {
				t.Fatalf("reply does not parse: %v", err)
			}
			if network == netx.UDP {
				limit := dns.MinMsgSize
				if opt := r.IsEdns0(); opt != nil {
					q := new(dns.Msg)
					if q.Unpack(b) == nil && q.IsEdns0() != nil {
						limit = max(limit, int(q.IsEdns0().UDPSize()))
					}
				}
				if len(out) > limit {
					t.Fatalf("UDP reply of %d bytes, client takes %d", len(out), limit)
				}
			}
		}
	})
}
