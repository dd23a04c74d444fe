package main

import (
	"net/netip"
	"strings"
	"testing"

	mdns "github.com/miekg/dns"
)

func TestStubAnswerIsWhatMiekgReads(t *testing.T) {
	name := wireName("n42.bench.test")
	q := appendQuery(nil, 0xbeef, name)
	var m mdns.Msg
	if err := m.Unpack(q); err != nil {
		t.Fatalf("query does not parse: %v", err)
	}
	if m.Id != 0xbeef || !m.RecursionDesired || len(m.Question) != 1 || m.Question[0].Name != "n42.bench.test." ||
		m.Question[0].Qtype != mdns.TypeA {
		t.Fatalf("query is %v", &m)
	}

	r := stubAnswer(nil, q, func() uint64 { return 0 })
	var a mdns.Msg
	if err := a.Unpack(r); err != nil {
		t.Fatalf("answer does not parse: %v", err)
	}
	want := addressOf(name)
	if a.Id != 0xbeef || !a.Response || a.Rcode != mdns.RcodeSuccess || len(a.Answer) != 1 {
		t.Fatalf("answer is %v", &a)
	}
	rr, ok := a.Answer[0].(*mdns.A)
	if !ok || rr.Hdr.Ttl != answerTTL || rr.Hdr.Name != "n42.bench.test." || netip.AddrFrom4(want) != netip.MustParseAddr(rr.A.String()) {
		t.Fatalf("record is %v, want A %v", a.Answer[0], want)
	}
	if err := checkReply(r, name, want); err != nil {
		t.Fatalf("checkReply: %v", err)
	}
}

// A router's upstream query is a miekg message with EDNS and perhaps
// another case: the answer carries its question and the same address.
func TestStubAnswersARoutersQuery(t *testing.T) {
	m := new(mdns.Msg)
	m.SetQuestion("N42.Bench.Test.", mdns.TypeA)
	m.SetEdns0(1232, false)
	q, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	var a mdns.Msg
	if err := a.Unpack(stubAnswer(nil, q, nil)); err != nil {
		t.Fatal(err)
	}
	if a.Id != m.Id || a.Question[0].Name != "N42.Bench.Test." || len(a.Answer) != 1 {
		t.Fatalf("answer is %v", &a)
	}
	want := addressOf(wireName("n42.bench.test"))
	if got := a.Answer[0].(*mdns.A).A.To4(); [4]byte(got) != want {
		t.Fatalf("address %v, want %v", got, want)
	}
}

func TestStubCountAndNoAnswers(t *testing.T) {
	m := new(mdns.Msg)
	m.SetQuestion("queries.stub.", mdns.TypeTXT)
	m.Question[0].Qclass = mdns.ClassCHAOS
	q, _ := m.Pack()
	var a mdns.Msg
	if err := a.Unpack(stubAnswer(nil, q, func() uint64 { return 1234 })); err != nil {
		t.Fatal(err)
	}
	if len(a.Answer) != 1 || a.Answer[0].(*mdns.TXT).Txt[0] != "1234" {
		t.Fatalf("answer is %v", &a)
	}

	m.SetQuestion("x.bench.test.", mdns.TypeAAAA)
	q, _ = m.Pack()
	if err := a.Unpack(stubAnswer(nil, q, nil)); err != nil || len(a.Answer) != 0 || a.Rcode != 0 {
		t.Fatalf("AAAA: %v, %v", &a, err)
	}

	resp := appendQuery(nil, 1, wireName("x.test"))
	resp[2] |= 0x80 // QR
	for _, b := range [][]byte{resp, {1, 2, 3}, append(appendQuery(nil, 1, wireName("x.test"))[:14], 0xc0)} {
		if out := stubAnswer(nil, b, nil); len(out) != 0 {
			t.Errorf("answered % x", b)
		}
	}
}

func TestCheckReplyRefuses(t *testing.T) {
	name := wireName("n1.bench.test")
	good := stubAnswer(nil, appendQuery(nil, 7, name), nil)
	want := addressOf(name)
	cases := map[string]func() ([]byte, []byte, [4]byte){
		"wrong address": func() ([]byte, []byte, [4]byte) { return good, name, [4]byte{192, 0, 2, 0} },
		"another question": func() ([]byte, []byte, [4]byte) {
			return good, wireName("n2.bench.test"), want
		},
		"rcode 2": func() ([]byte, []byte, [4]byte) {
			b := append([]byte(nil), good...)
			b[3] |= 2
			return b, name, want
		},
		"no A record": func() ([]byte, []byte, [4]byte) {
			b := append([]byte(nil), good[:headerLen+len(name)+4]...)
			b[7] = 0
			return b, name, want
		},
	}
	for why, f := range cases {
		r, n, w := f()
		err := checkReply(r, n, w)
		if err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("%s: got %v", why, err)
		}
	}
}

func TestNames(t *testing.T) {
	c := &coldNames{suffix: wireName("a3.r1x.bench.test")}
	var m mdns.Msg
	for i := range 3 {
		n := c.next(nil)
		m.SetQuestion("x.", mdns.TypeA)
		q := appendQuery(nil, 1, n)
		if err := m.Unpack(q); err != nil {
			t.Fatal(err)
		}
		if got, want := m.Question[0].Name, []string{"1", "2", "3"}[i]+".a3.r1x.bench.test."; got != want {
			t.Fatalf("name %q, want %q", got, want)
		}
	}
	w := &warmNames{names: [][]byte{wireName("a"), wireName("b"), wireName("c")}, i: 1, left: 2, once: true}
	if a, b, end := w.next(nil), w.next(nil), w.next(nil); string(a) != string(wireName("b")) ||
		string(b) != string(wireName("c")) || end != nil {
		t.Fatalf("warm once: %q %q %q", a, b, end)
	}
	hdr := appendSocksUDP(nil, dnsServer)
	from, payload, err := parseSocksUDP(append(hdr, 9))
	if err != nil || from != dnsServer || len(payload) != 1 {
		t.Fatalf("socks: %v %v %v", from, payload, err)
	}
}
