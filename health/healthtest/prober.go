package healthtest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"switchyard/health"
	"switchyard/netx"
)

// DefaultRTT is the round trip of a success nothing scripted otherwise.
const DefaultRTT = 10 * time.Millisecond

// ErrProbe is the failure Fail scripts.
var ErrProbe = errors.New("scripted probe failure")

// Outcome is one scripted measurement: a success of RTT over Family, or
// Err.
type Outcome struct {
	RTT    time.Duration
	Family netx.Family
	Err    error
}

// OK is a success of rtt over IPv4.
func OK(rtt time.Duration) Outcome { return Outcome{RTT: rtt} }

// OKOn is a success of rtt over family f.
func OKOn(rtt time.Duration, f netx.Family) Outcome { return Outcome{RTT: rtt, Family: f} }

// Fail is a failure naming no family.
func Fail() Outcome { return Outcome{Err: ErrProbe} }

// FailOn is a failure on family f (a *health.FamilyError).
func FailOn(f netx.Family) Outcome {
	return Outcome{Family: f, Err: &health.FamilyError{Family: f, Err: ErrProbe}}
}

// Gauge counts calls in flight across probers and keeps their peak.
type Gauge struct {
	cur, peak atomic.Int64
}

// Enter counts one call in; Leave counts it out. A Prober with a Gauge
// calls them itself; other probers may too.
func (g *Gauge) Enter() {
	n := g.cur.Add(1)
	for {
		p := g.peak.Load()
		if n <= p || g.peak.CompareAndSwap(p, n) {
			return
		}
	}
}

func (g *Gauge) Leave() { g.cur.Add(-1) }

// Current returns the calls in flight; Peak the most there ever were.
func (g *Gauge) Current() int { return int(g.cur.Load()) }
func (g *Gauge) Peak() int    { return int(g.peak.Load()) }

// Prober is a scripted health.QUICProber. Each call takes the next queued
// outcome of its kind (TCP, UDP, QUIC), or the kind's default once the
// queue is empty (a zero Prober succeeds with DefaultRTT over IPv4). While blocked, calls
// wait for Unblock or their context (returning its error).
type Prober struct {
	// Gauge, when set, counts this prober's calls in flight.
	Gauge *Gauge

	mu         sync.Mutex
	tcp, udp   script
	quic       script
	gate       chan struct{} // non-nil while blocked
	tcpCalls   int
	udpCalls   int
	quicCalls  int
	lastURL    string
	lastMethod string
	lastServer netx.Addr
	lastQUIC   string
}

type script struct {
	queue []Outcome
	dflt  *Outcome
}

func (s *script) next() Outcome {
	if len(s.queue) > 0 {
		o := s.queue[0]
		s.queue = s.queue[1:]
		return o
	}
	if s.dflt != nil {
		return *s.dflt
	}
	return OK(DefaultRTT)
}

// SetTCP sets the outcome of TCP calls once the queue is empty; SetUDP
// that of UDP calls, SetQUIC that of QUIC calls.
func (p *Prober) SetTCP(o Outcome)  { p.mu.Lock(); p.tcp.dflt = &o; p.mu.Unlock() }
func (p *Prober) SetUDP(o Outcome)  { p.mu.Lock(); p.udp.dflt = &o; p.mu.Unlock() }
func (p *Prober) SetQUIC(o Outcome) { p.mu.Lock(); p.quic.dflt = &o; p.mu.Unlock() }

// QueueTCP appends outcomes for the next TCP calls; QueueUDP for UDP.
func (p *Prober) QueueTCP(o ...Outcome) {
	p.mu.Lock()
	p.tcp.queue = append(p.tcp.queue, o...)
	p.mu.Unlock()
}
func (p *Prober) QueueUDP(o ...Outcome) {
	p.mu.Lock()
	p.udp.queue = append(p.udp.queue, o...)
	p.mu.Unlock()
}
func (p *Prober) QueueQUIC(o ...Outcome) {
	p.mu.Lock()
	p.quic.queue = append(p.quic.queue, o...)
	p.mu.Unlock()
}

// Block makes calls wait until Unblock.
func (p *Prober) Block() {
	p.mu.Lock()
	if p.gate == nil {
		p.gate = make(chan struct{})
	}
	p.mu.Unlock()
}

// Unblock releases every waiting call, and lets later ones through.
func (p *Prober) Unblock() {
	p.mu.Lock()
	if p.gate != nil {
		close(p.gate)
		p.gate = nil
	}
	p.mu.Unlock()
}

// Calls returns the TCP and UDP calls made so far.
func (p *Prober) Calls() (tcp, udp int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tcpCalls, p.udpCalls
}

// LastTCP returns the URL and method of the last TCP call; LastUDP the
// server of the last UDP call.
func (p *Prober) LastTCP() (url, method string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastURL, p.lastMethod
}

func (p *Prober) LastUDP() netx.Addr {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastServer
}

// QUICCalls returns the QUIC calls made so far and the URL of the last.
func (p *Prober) QUICCalls() (n int, url string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.quicCalls, p.lastQUIC
}

func (p *Prober) wait(ctx context.Context, gate chan struct{}) error {
	if gate == nil {
		return nil
	}
	select {
	case <-gate:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// kind is what a call measures.
type kind uint8

const (
	kindTCP kind = iota
	kindUDP
	kindQUIC
)

func (p *Prober) measure(ctx context.Context, k kind, url, method string, server netx.Addr) (health.Result, error) {
	if p.Gauge != nil {
		p.Gauge.Enter()
		defer p.Gauge.Leave()
	}
	p.mu.Lock()
	gate := p.gate
	var o Outcome
	switch k {
	case kindTCP:
		p.tcpCalls++
		p.lastURL, p.lastMethod = url, method
		o = p.tcp.next()
	case kindUDP:
		p.udpCalls++
		p.lastServer = server
		o = p.udp.next()
	default:
		p.quicCalls++
		p.lastQUIC = url
		o = p.quic.next()
	}
	p.mu.Unlock()
	if err := p.wait(ctx, gate); err != nil {
		return health.Result{}, err
	}
	if o.Err != nil {
		return health.Result{}, o.Err
	}
	return health.Result{RTT: o.RTT, Family: o.Family}, nil
}

// TCP implements health.Prober.
func (p *Prober) TCP(ctx context.Context, url, method string) (health.Result, error) {
	return p.measure(ctx, kindTCP, url, method, netx.Addr{})
}

// UDP implements health.Prober.
func (p *Prober) UDP(ctx context.Context, server netx.Addr) (health.Result, error) {
	return p.measure(ctx, kindUDP, "", "", server)
}

// QUIC implements health.QUICProber.
func (p *Prober) QUIC(ctx context.Context, url string) (health.Result, error) {
	return p.measure(ctx, kindQUIC, url, "", netx.Addr{})
}

var _ health.QUICProber = (*Prober)(nil)
