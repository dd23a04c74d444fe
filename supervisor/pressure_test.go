package supervisor

import (
	"context"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"switchyard/config"
	"switchyard/health"
	"switchyard/internal/pressure"
	"switchyard/netx"
	"switchyard/outbound"
	"switchyard/spec"
)

// fakeCounters is a carrier whose counters move by one active interval
// per reading, at the RTT the test sets.
type fakeCounters struct {
	mu    sync.Mutex
	rtt   time.Duration
	n     uint64
	reads int
}

func (f *fakeCounters) CarrierCounters() (pressure.Counters, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	f.reads++
	return pressure.Counters{Carrier: 1, Family: netx.V4, RTT: f.rtt, Acked: f.n * 100, Payload: f.n << 16, Sent: f.n << 15,
		Transmissions: f.n * 50}, true
}

func (f *fakeCounters) set(rtt time.Duration) {
	f.mu.Lock()
	f.rtt = rtt
	f.mu.Unlock()
}

func (f *fakeCounters) readCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads
}

// countedOutbound is an outbound that reads the fake QUIC counters.
type countedOutbound struct {
	outbound.Outbound
	*fakeCounters
}

type hintEvent struct {
	node    health.NodeID
	network netx.Network
}

type fakePressure struct {
	mu    sync.Mutex
	hints []hintEvent
}

func (f *fakePressure) Pressure(node health.NodeID, network netx.Network, _ time.Time) {
	f.mu.Lock()
	f.hints = append(f.hints, hintEvent{node, network})
	f.mu.Unlock()
}

func (f *fakePressure) take() []hintEvent {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := f.hints
	f.hints = nil
	return h
}

const pressureConfig = `
[[outbounds]]
tag = "s1"
type = "socks"
server = "127.0.0.1:SERVER"
udp = true
[[outbounds]]
tag = "s2"
type = "socks"
server = "127.0.0.1:2"
[[outbounds]]
tag = "d1"
type = "direct"
[[groups]]
tag = "smart"
policy = "score"
members = [SCORE]
[[groups]]
tag = "pick"
policy = "selector"
members = ["s2", "d1"]
[health]
tcp_check_url = []
udp_check_dns = []
check_interval = "1h"
[route]
final = "smart"
`

func pressureSpec(t *testing.T, server, members string) *spec.Spec {
	t.Helper()
	text := strings.NewReplacer("SERVER", server, "SCORE", members).Replace(pressureConfig)
	s, _, err := config.Parse([]byte(text), "t.toml")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A Score leaf's runtime is sampled for carrier pressure and its hints
// reach the Score engine for the networks each carrier carries; a
// non-Score runtime is never sampled; a reload fences the Monitors it
// keeps, and a replaced or disarmed runtime is sampled no more.
func TestCarrierPressureReachesScoreForScoreLeavesOnly(t *testing.T) {
	var mu sync.Mutex
	sources := map[string][]*fakeCounters{}
	wrap := func(o spec.Outbound, out outbound.Outbound) outbound.Outbound {
		if o.Type != "socks" {
			return out
		}
		f := &fakeCounters{rtt: 20 * time.Millisecond}
		mu.Lock()
		sources[o.Tag] = append(sources[o.Tag], f)
		mu.Unlock()
		return countedOutbound{out, f}
	}
	feed := &fakePressure{}
	sv, err := New(pressureSpec(t, "1", `"s1", "d1"`), Options{Logger: slog.New(slog.DiscardHandler), wrap: wrap,
		beatPeriod: time.Hour, pressureFeed: feed})
	if err != nil {
		t.Fatal(err)
	}
	defer sv.Close()
	s1, s2 := sources["s1"][0], sources["s2"][0]
	id1, _ := sv.NodeID("s1")

	r := sv.cur.outbounds["s1"]
	if r.press == nil || sv.beat == nil {
		t.Fatal("the Score leaf's runtime is not sampled")
	}
	if r.gate == nil || r.gate.set.Load() == nil {
		t.Fatal("the Score leaf's dialer hands its sockets to nothing")
	}
	var nets [][]netx.Network
	for _, c := range r.press.carriers {
		nets = append(nets, c.nets)
	}
	// The SOCKS TCP carrier carries TCP only (its UDP is native); the
	// QUIC-like counters carry both.
	if want := [][]netx.Network{{netx.TCP}, {netx.TCP, netx.UDP}}; !slices.EqualFunc(nets, want, slices.Equal) {
		t.Fatalf("carrier networks %v, want %v", nets, want)
	}
	if p := sv.cur.outbounds["s2"]; p.press != nil || p.gate.set.Load() != nil {
		t.Fatal("a non-Score runtime is sampled")
	}

	at := time.Now()
	pass := func(n int, rtt time.Duration) {
		s1.set(rtt)
		for range n {
			at = at.Add(2 * time.Second)
			sv.beat.Pass(at)
		}
	}
	pass(5, 20*time.Millisecond) // the first reading, then four training intervals
	pass(2, 120*time.Millisecond)
	if h := feed.take(); len(h) != 0 {
		t.Fatalf("hints before three pressured intervals: %v", h)
	}
	pass(1, 120*time.Millisecond)
	if h := feed.take(); !slices.Equal(h, []hintEvent{{id1, netx.TCP}, {id1, netx.UDP}}) {
		t.Fatalf("hints %v, want s1's on tcp and udp", h)
	}
	if s2.readCount() != 0 {
		t.Fatal("the non-Score runtime's carrier was read")
	}

	// A reload keeps the runtime and fences its Monitor: the episode is
	// withdrawn, the baseline retrains.
	if err := sv.Apply(pressureSpec(t, "1", `"s1", "d1"`)); err != nil {
		t.Fatal(err)
	}
	kept := sv.cur.outbounds["s1"].press
	if kept != r.press {
		t.Fatal("a kept runtime's sampling was replaced")
	}
	mon := kept.carriers[1].mon
	if _, ok := mon.Latest(at); ok || mon.State(netx.V4).Trained {
		t.Fatal("the reload did not fence the Monitor")
	}
	pass(3, 120*time.Millisecond)
	if h := feed.take(); len(h) != 0 {
		t.Fatalf("hints right after the reload: %v", h)
	}

	// A changed s1 is a new runtime: the old one is sampled no more.
	if err := sv.Apply(pressureSpec(t, "3", `"s1", "d1"`)); err != nil {
		t.Fatal(err)
	}
	reads := s1.readCount()
	pass(2, 20*time.Millisecond)
	if s1.readCount() != reads {
		t.Fatal("the replaced runtime is still sampled")
	}
	if sources["s1"][1].readCount() == 0 || sv.cur.outbounds["s1"].press == nil {
		t.Fatal("the new runtime is not sampled")
	}
	// Out of the Score group, s1 is disarmed.
	if err := sv.Apply(pressureSpec(t, "3", `"d1", "s2"`)); err != nil {
		t.Fatal(err)
	}
	if p := sv.cur.outbounds["s1"]; p.press != nil || p.gate.set.Load() != nil {
		t.Fatal("a runtime out of every Score group is still sampled")
	}
	if sv.cur.outbounds["s2"].press == nil {
		t.Fatal("s2, now a Score leaf, is not sampled")
	}
}

// Only a proxy's own TCP carriers name networks: a Shadowsocks or SOCKS
// runtime's carrier is TCP's (its UDP is native), a stream protocol's
// carries both, and a runtime without TCP carriers gets no gate.
func TestTCPCarrierNetworks(t *testing.T) {
	for typ, want := range map[string][]netx.Network{
		"shadowsocks": {netx.TCP}, "socks": {netx.TCP}, "http": {netx.TCP},
		"trojan": {netx.TCP, netx.UDP}, "vless": {netx.TCP, netx.UDP}, "vmess": {netx.TCP, netx.UDP},
		"hysteria2": nil, "wireguard": nil, "direct": nil, "block": nil, "dns": nil,
	} {
		if got := tcpCarrierNets(typ, true); !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", typ, got, want)
		}
	}
	if got := tcpCarrierNets("vless", false); !slices.Equal(got, []netx.Network{netx.TCP}) {
		t.Errorf("vless without UDP: %v", got)
	}
}

// The Score leaf's proxy sockets reach its carrier set through its own
// dialer copy; a non-Score runtime's sockets are kept by nothing.
func TestScoreLeafProxySocketsAreCarriers(t *testing.T) {
	if !pressure.TCPInfoAvailable {
		t.Skip("no TCP_INFO here: a TCP carrier set keeps nothing")
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	defer func() { ln.Close(); <-done }()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	text := strings.ReplaceAll(pressureConfig, `server = "127.0.0.1:2"`, `server = "127.0.0.1:`+port+`"`)
	text = strings.NewReplacer("SERVER", port, "SCORE", `"s1", "d1"`).Replace(text)
	s, _, err := config.Parse([]byte(text), "t.toml")
	if err != nil {
		t.Fatal(err)
	}
	sv, err := New(s, Options{Logger: slog.New(slog.DiscardHandler), beatPeriod: time.Hour, pressureFeed: &fakePressure{}})
	if err != nil {
		t.Fatal(err)
	}
	defer sv.Close()
	dial := func(tag string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		dst, _ := netx.ParseAddr("192.0.2.1:80")
		if c, err := sv.cur.outbounds[tag].target.Outbound().DialStream(ctx, netx.Flow{Network: netx.TCP, Dst: dst}); err == nil {
			c.Close()
		}
	}
	dial("s1")
	dial("s2")
	set := sv.cur.outbounds["s1"].gate.set.Load()
	if set == nil || set.Len() != 1 {
		t.Fatalf("the Score leaf's carrier set: %v", set)
	}
	if sv.cur.outbounds["s2"].gate.set.Load() != nil {
		t.Fatal("the non-Score runtime keeps its sockets")
	}
}
