package dnsout

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"

	"switchyard/dns/serve"
	"switchyard/netx"
	"switchyard/outbound"
	"switchyard/relay"
)

// answers answers every A question with 192.0.2.7.
type answers struct{}

func (answers) Exchange(_ context.Context, q *dns.Msg) (*dns.Msg, error) {
	r := new(dns.Msg)
	r.SetReply(q)
	r.Answer = []dns.RR{&dns.A{
		Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
		A:   net.IPv4(192, 0, 2, 7),
	}}
	return r, nil
}

func packed(t *testing.T, id uint16, name string) []byte {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	m.Id = id
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func check(t *testing.T, b []byte, id uint16) {
	t.Helper()
	r := new(dns.Msg)
	if err := r.Unpack(b); err != nil {
		t.Fatal(err)
	}
	if r.Id != id || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "192.0.2.7" {
		t.Fatalf("answer %v", r)
	}
}

func TestTCPQueryThroughDialStream(t *testing.T) {
	o := New(serve.New(answers{}, serve.Options{}))
	// The destination's port does not matter: a rule sent the flow here.
	f := netx.Flow{Network: netx.TCP, Dst: netx.DomainAddr("dns.google", 853)}
	c, err := o.DialStream(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	q := packed(t, 21, "example.org.")
	if _, err := c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(q))), q...)); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var hdr [2]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, binary.BigEndian.Uint16(hdr[:]))
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatal(err)
	}
	check(t, b, 21)
}

func TestUDPQueryThroughDialPacket(t *testing.T) {
	o := New(serve.New(answers{}, serve.Options{}))
	if !outbound.CarriesUDP(o) {
		t.Fatal("CarriesUDP false")
	}
	dst := netx.AddrFromAddrPort(netip.MustParseAddrPort("1.1.1.1:53"))
	ctx, cancel := context.WithCancel(context.Background())
	l, err := o.DialPacket(ctx, netx.Flow{Network: netx.UDP, Dst: dst})
	cancel() // the dial context ends; the link lives on
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.WritePacket(packed(t, 22, "example.org."), dst); err != nil {
		t.Fatal(err)
	}
	size, err := netx.WaitPacket(l)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, size)
	n, from, err := l.ReadPacket(b)
	if err != nil {
		t.Fatal(err)
	}
	if from != dst {
		t.Fatalf("answer from %v, want %v", from, dst)
	}
	check(t, b[:n], 22)
}

func TestDialWithADoneContextFails(t *testing.T) {
	o := New(serve.New(answers{}, serve.Options{}))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := o.DialStream(ctx, netx.Flow{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("stream: %v", err)
	}
	if _, err := o.DialPacket(ctx, netx.Flow{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("packet: %v", err)
	}
}

// A real TCP client, relayed as the connector relays a flow: its query is
// answered, and a client that half-closes after its query still gets the
// answer before EOF.
func TestRelayedTCPClientWithHalfClose(t *testing.T) {
	o := New(serve.New(answers{}, serve.Options{}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	relayed := make(chan struct{})
	go func() {
		defer close(relayed)
		in, err := ln.Accept()
		if err != nil {
			return
		}
		up, err := o.DialStream(context.Background(), netx.Flow{})
		if err != nil {
			in.Close()
			return
		}
		relay.Pipe(context.Background(), in, up, 5*time.Second)
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	q := packed(t, 23, "example.org.")
	if _, err := c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(q))), q...)); err != nil {
		t.Fatal(err)
	}
	c.(*net.TCPConn).CloseWrite()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	all, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) < 2 || int(binary.BigEndian.Uint16(all)) != len(all)-2 {
		t.Fatalf("read % x", all)
	}
	check(t, all[2:], 23)
	<-relayed
}
