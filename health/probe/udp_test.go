package probe

import (
	"context"
	"encoding/binary"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/health"
	"switchyard/netx"
)

func TestUDPProbe(t *testing.T) {
	r := newDNSResponder(t, func(q []byte) [][]byte { return [][]byte{response(q, 0)} })
	p := New(&testDialer{}, Options{})
	res, err := p.UDP(within(t, 5*time.Second), r.addr())
	if err != nil {
		t.Fatal(err)
	}
	if res.RTT <= 0 || res.RTT > 100*time.Millisecond {
		t.Fatalf("RTT %v", res.RTT)
	}
}

// Replies with another ID, or that are not DNS responses, are not the
// answer: the probe waits on for the one that is.
func TestUDPProbeIgnoresOthers(t *testing.T) {
	const late = 80 * time.Millisecond
	r := newDNSResponder(t, func(q []byte) [][]byte {
		wrong := response(q, 0)
		binary.BigEndian.PutUint16(wrong, binary.BigEndian.Uint16(q)+1)
		time.Sleep(late)
		return [][]byte{wrong, []byte("junk"), q, response(q, 3)}
	})
	res, err := New(&testDialer{}, Options{}).UDP(within(t, 5*time.Second), r.addr())
	if err != nil || res.RTT < late {
		t.Fatalf("%+v, %v", res, err)
	}
	// With only a wrong ID, the probe ends at its context.
	r = newDNSResponder(t, func(q []byte) [][]byte {
		wrong := response(q, 0)
		wrong[0] ^= 0xff
		return [][]byte{wrong}
	})
	start := time.Now()
	_, err = New(&testDialer{}, Options{}).UDP(within(t, 150*time.Millisecond), r.addr())
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > time.Second {
		t.Fatalf("%v after %v", err, time.Since(start))
	}
}

func TestUDPProbeBounded(t *testing.T) {
	r := newDNSResponder(t, func([]byte) [][]byte { return nil })
	start := time.Now()
	p := New(&testDialer{}, Options{Timeouts: Timeouts{Request: 120 * time.Millisecond}})
	_, err := p.UDP(context.Background(), r.addr())
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > time.Second {
		t.Fatalf("%v after %v", err, time.Since(start))
	}
}

// reportingLink is a loopback link that knows its server's family and
// whether it was closed.
type reportingLink struct {
	*udpLink
	closed atomic.Bool
}

func (l *reportingLink) ServerFamily() (netx.Family, bool) { return netx.V6, true }
func (l *reportingLink) Close() error                      { l.closed.Store(true); return l.udpLink.Close() }

func TestUDPProbeLink(t *testing.T) {
	r := newDNSResponder(t, func(q []byte) [][]byte { return [][]byte{response(q, 0)} })
	var links []*reportingLink
	var flows []netx.Flow
	d := &testDialer{packet: func(_ context.Context, f netx.Flow) (netx.PacketLink, error) {
		u, err := newUDPLink()
		if err != nil {
			return nil, err
		}
		l := &reportingLink{udpLink: u}
		links = append(links, l)
		flows = append(flows, f)
		return l, nil
	}}
	p := New(d, Options{})
	res, err := p.UDP(within(t, 5*time.Second), r.addr())
	if err != nil || res.Family != netx.V6 {
		t.Fatalf("%+v, %v; want the link's V6", res, err)
	}
	if !links[0].closed.Load() {
		t.Fatal("the link was left open")
	}
	if flows[0].Network != netx.UDP || flows[0].Dst != r.addr() {
		t.Fatalf("flow %+v; want UDP to %v", flows[0], r.addr())
	}
	// The failure of a link that knows its family carries it.
	silent := newDNSResponder(t, func([]byte) [][]byte { return nil })
	_, err = p.UDP(within(t, 100*time.Millisecond), silent.addr())
	var fe *health.FamilyError
	if !errors.As(err, &fe) || fe.Family != netx.V6 || !links[1].closed.Load() {
		t.Fatalf("%v; want a FamilyError of V6 and the link closed", err)
	}
}

// A server given without a port is asked on 53.
func TestUDPProbeDefaultPort(t *testing.T) {
	got := make(chan netx.Addr, 1)
	d := &testDialer{packet: func(_ context.Context, f netx.Flow) (netx.PacketLink, error) {
		got <- f.Dst
		return nil, errors.New("no network")
	}}
	New(d, Options{}).UDP(context.Background(), netx.DomainAddr("dns.test", 0))
	if a := <-got; a != netx.DomainAddr("dns.test", 53) {
		t.Fatalf("asked %v", a)
	}
}
