package fanout_test

import (
	"bytes"
	"net/netip"
	"sync"
	"testing"

	"switchyard/fanout"
	"switchyard/netx"
	"switchyard/plane"
	"switchyard/route"
	"switchyard/route/sniff/snifftest"
	"switchyard/spec"
	"switchyard/track"
)

// sniffingFlow is the association of an inbound with sniff = true.
var sniffingFlow = func() netx.Flow { f := assocFlow; f.SniffPackets = true; return f }()

// recorder is an outbound that records every packet sent on its links.
type recorder struct {
	*scriptedOutbound
	mu      sync.Mutex
	packets [][]byte
	to      []netx.Addr
}

func newRecorder() *recorder {
	r := &recorder{}
	r.scriptedOutbound = &scriptedOutbound{replies: func(p []byte, to netx.Addr) []datagram {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.packets = append(r.packets, bytes.Clone(p))
		r.to = append(r.to, to)
		return nil
	}}
	return r
}

func (r *recorder) got() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]byte(nil), r.packets...)
}

// sniffPlane routes domain quic.example to "named", protocol quic to
// "quic", protocol dns to "dns" and everything else to "final".
type sniffPlane struct {
	named, quic, dns, final *recorder
	plane                   *plane.Plane
}

func newSniffPlane(t *testing.T) *sniffPlane {
	t.Helper()
	sp := &sniffPlane{named: newRecorder(), quic: newRecorder(), dns: newRecorder(), final: newRecorder()}
	final := target("final", 1, sp.final)
	p := &plane.Plane{Epoch: 1, Final: final, Targets: map[string]*plane.Target{"final": final}}
	for _, r := range []struct {
		rule spec.Rule
		tag  string
		out  *recorder
	}{
		{spec.Rule{Domain: []string{"quic.example"}}, "named", sp.named},
		{spec.Rule{Protocol: []string{"quic"}}, "quic", sp.quic},
		{spec.Rule{Protocol: []string{"dns"}}, "dns", sp.dns},
	} {
		m, err := route.Compile(r.rule)
		if err != nil {
			t.Fatal(err)
		}
		tg := target(r.tag, 1, r.out)
		p.Rules = append(p.Rules, plane.Rule{Match: m, Target: tg})
		p.Targets[r.tag] = tg
	}
	sp.plane = p
	return sp
}

var (
	quicServer  = netx.AddrFromAddrPort(netip.MustParseAddrPort("192.0.2.10:443"))
	otherServer = netx.AddrFromAddrPort(netip.MustParseAddrPort("192.0.2.11:443"))
	dcid        = []byte{0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88}
)

// shortHeader is a 1-RTT packet of the connection: it names nothing.
var shortHeader = append([]byte{0x43, 0xaa, 0xbb, 0xcc, 0xdd}, make([]byte, 40)...)

func wholeInitial(t *testing.T, version uint32, name string) []byte {
	t.Helper()
	return snifftest.Initial(t, version, dcid, 0, snifftest.Pad(snifftest.Crypto(0, snifftest.HandshakeMessage(t, name)), 1200))
}

func sentTo(t *testing.T, r *recorder, want ...[]byte) {
	t.Helper()
	got := r.got()
	if len(got) != len(want) {
		t.Fatalf("%d packets sent, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("packet %d is not the one sent (%d bytes, want %d)", i, len(got[i]), len(want[i]))
		}
	}
}

// A QUIC connection's Initial routes by its SNI and protocol, and its later
// packets, which name nothing, take the same route.
func TestSniffQUICRoutesTheConnection(t *testing.T) {
	for _, version := range []uint32{snifftest.V1, snifftest.V2} {
		sp := newSniffPlane(t)
		a := newAssocOf(t, sp.plane, sniffingFlow)
		initial := wholeInitial(t, version, "QUIC.example")
		a.send(t, string(initial), quicServer)
		a.send(t, string(shortHeader), quicServer)
		a.Settle()
		sentTo(t, sp.named, initial, shortHeader)
		if f := a.flow(t, "named@v1"); f.Sniffed != "quic.example" {
			t.Fatalf("tracked flow sniffed %q", f.Sniffed)
		}
		// Another name is still QUIC; the rule on protocol takes it and
		// its later packets.
		other := snifftest.Initial(t, version, []byte{9, 9, 9, 9, 9, 9, 9, 9}, 0, snifftest.Pad(snifftest.Crypto(0, snifftest.HandshakeMessage(t, "else.example")), 1200))
		a.send(t, string(other), otherServer)
		a.send(t, string(shortHeader), otherServer)
		a.Settle()
		sentTo(t, sp.quic, other, shortHeader)
		// A packet that is neither, to a peer with no QUIC connection.
		a.send(t, "hello", netx.DomainAddr("plain.example", 9))
		a.send(t, string(shortHeader), netx.DomainAddr("plain.example", 9))
		a.Settle()
		sentTo(t, sp.final, []byte("hello"), shortHeader)
	}
}

// Two Initials carry one ClientHello: the first is held until the second
// arrives, then both go, in order, on the route the whole ClientHello gives.
func TestSniffQUICClientHelloOverTwoDatagrams(t *testing.T) {
	sp := newSniffPlane(t)
	a := newAssocOf(t, sp.plane, sniffingFlow)
	msg := snifftest.HandshakeMessage(t, "quic.example")
	first := snifftest.Initial(t, snifftest.V1, dcid, 0, snifftest.Pad(snifftest.Crypto(0, msg[:40]), 1200))
	second := snifftest.Initial(t, snifftest.V1, dcid, 1, snifftest.Pad(snifftest.Crypto(40, msg[40:]), 1200))
	a.send(t, string(first), quicServer)
	for _, r := range []*recorder{sp.named, sp.quic, sp.final} {
		a.Settle()
		sentTo(t, r)
	}
	a.send(t, string(second), quicServer)
	a.send(t, string(first), quicServer) // a retransmission
	a.send(t, string(shortHeader), quicServer)
	a.Settle()
	sentTo(t, sp.named, first, second, first, shortHeader)
	a.Settle()
	sentTo(t, sp.quic)
	a.Settle()
	sentTo(t, sp.final)
}

// A client that never completes its ClientHello is not held back for ever:
// past the bound its Initials go as QUIC without a name.
func TestSniffQUICHeldInitialsAreBounded(t *testing.T) {
	sp := newSniffPlane(t)
	a := newAssocOf(t, sp.plane, sniffingFlow)
	msg := snifftest.HandshakeMessage(t, "quic.example")
	first := snifftest.Initial(t, snifftest.V1, dcid, 0, snifftest.Pad(snifftest.Crypto(0, msg[:40]), 1200))
	var want [][]byte
	for range 9 {
		a.send(t, string(first), quicServer)
		want = append(want, first)
	}
	a.Settle()
	sentTo(t, sp.quic, want...)
	a.Settle()
	sentTo(t, sp.named)
}

// A DNS query on any port routes as protocol dns with its question name.
func TestSniffDNSQuery(t *testing.T) {
	sp := newSniffPlane(t)
	a := newAssocOf(t, sp.plane, sniffingFlow)
	q := snifftest.DNSQuery("www.example.org", 1, 1, true)
	resolver := netx.AddrFromAddrPort(netip.MustParseAddrPort("192.0.2.53:5353"))
	a.send(t, string(q), resolver)
	a.Settle()
	sentTo(t, sp.dns, q)
	if f := a.flow(t, "dns@v1"); f.Sniffed != "www.example.org" {
		t.Fatalf("tracked flow sniffed %q", f.Sniffed)
	}
	named := snifftest.DNSQuery("quic.example", 28, 1, false)
	a.send(t, string(named), resolver)
	a.Settle()
	sentTo(t, sp.named, named) // the domain rule comes first
	a.send(t, string(q[:len(q)-1]), resolver)
	a.Settle()
	sentTo(t, sp.final, q[:len(q)-1])
}

// An inbound that does not sniff routes every packet unsniffed.
func TestNoSniffWithoutTheInboundsSetting(t *testing.T) {
	sp := newSniffPlane(t)
	a := newAssocOf(t, sp.plane, assocFlow)
	initial := wholeInitial(t, snifftest.V1, "quic.example")
	q := snifftest.DNSQuery("www.example.org", 1, 1, false)
	a.send(t, string(initial), quicServer)
	a.send(t, string(q), quicServer)
	a.Settle()
	sentTo(t, sp.final, initial, q)
}

// The steady state of a sniffing association allocates nothing: a QUIC
// connection's later packets and packets that sniff to nothing.
func TestSniffSteadyStateAllocatesNothing(t *testing.T) {
	m, err := route.Compile(spec.Rule{Domain: []string{"quic.example"}})
	if err != nil {
		t.Fatal(err)
	}
	cell := new(plane.Cell)
	cell.Store(&plane.Plane{Epoch: 1, Final: target("final", 1, &scriptedOutbound{forget: true}),
		Rules: []plane.Rule{{Match: m, Target: target("named", 1, &scriptedOutbound{forget: true})}}})
	l := fanout.New(cell, sniffingFlow, track.New(), nil)
	defer l.Close()
	if err := l.WritePacket(wholeInitial(t, snifftest.V1, "quic.example"), quicServer); err != nil {
		t.Fatal(err)
	}
	l.WritePacket([]byte("x"), otherServer)
	l.Settle()
	for _, tt := range []struct {
		name string
		p    []byte
		to   netx.Addr
	}{
		{"short header of a sniffed connection", shortHeader, quicServer},
		{"short header to another peer", shortHeader, otherServer},
		{"not QUIC, not DNS", make([]byte, 1200), otherServer},
	} {
		if n := testing.AllocsPerRun(100, func() { l.WritePacket(tt.p, tt.to) }); n != 0 {
			t.Errorf("%s: %v allocations per packet", tt.name, n)
		}
	}
}

// BenchmarkWritePacketSniffed is BenchmarkWritePacket on a sniffing
// association, for a QUIC connection's later packets.
func BenchmarkWritePacketSniffed(b *testing.B) {
	cell := new(plane.Cell)
	cell.Store(&plane.Plane{Epoch: 1, Final: target("direct", 1, &scriptedOutbound{forget: true})})
	l := fanout.New(cell, sniffingFlow, track.New(), nil)
	defer l.Close()
	if err := l.WritePacket(snifftest.Initial(b, snifftest.V1, dcid, 0, snifftest.Pad(snifftest.Crypto(0, snifftest.HandshakeMessage(b, "b.example")), 1200)), quicServer); err != nil {
		b.Fatal(err)
	}
	payload := append(bytes.Clone(shortHeader), make([]byte, 1200)...)
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		if err := l.WritePacket(payload, quicServer); err != nil {
			b.Fatal(err)
		}
	}
}
