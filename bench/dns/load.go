package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// target is one router under test: its SOCKS5 listen address and the pid
// whose CPU time and peak RSS are read.
type target struct {
	name string
	addr string
	pid  int
}

// dnsServer is where every query is sent through an association. Both
// routers answer it in-process; the host is never asked.
var dnsServer = netip.MustParseAddrPort("1.1.1.1:53")

const dialTimeout = 5 * time.Second

// assoc is one SOCKS5 UDP association: its control connection and the
// client's socket.
type assoc struct {
	ctrl    net.Conn
	pc      *net.UDPConn
	relay   netip.AddrPort
	closing atomic.Bool
	ended   atomic.Bool // the router closed the control connection first
	done    chan struct{}
}

// openAssoc makes one UDP ASSOCIATE (no authentication, address and port
// zero: the client's address is not known before it sends) with proxy.
func openAssoc(proxy string) (*assoc, error) {
	c, err := net.DialTimeout("tcp", proxy, dialTimeout)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(dialTimeout))
	if _, err := c.Write([]byte{5, 1, 0, 5, 3, 0, 1, 0, 0, 0, 0, 0, 0}); err != nil {
		c.Close()
		return nil, err
	}
	var head [12]byte // method choice, then a reply with an IPv4 address
	if _, err := io.ReadFull(c, head[:]); err != nil {
		c.Close()
		return nil, fmt.Errorf("UDP ASSOCIATE: %w", err)
	}
	if head[0] != 5 || head[1] != 0 || head[3] != 0 || head[5] != 1 {
		c.Close()
		return nil, fmt.Errorf("UDP ASSOCIATE refused: % x", head)
	}
	relay := netip.AddrPortFrom(netip.AddrFrom4([4]byte(head[6:10])), uint16(head[10])<<8|uint16(head[11]))
	if relay.Addr().IsUnspecified() {
		ap, err := netip.ParseAddrPort(proxy)
		if err != nil {
			c.Close()
			return nil, err
		}
		relay = netip.AddrPortFrom(ap.Addr(), relay.Port())
	}
	c.SetDeadline(time.Time{})
	pc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		c.Close()
		return nil, err
	}
	a := &assoc{ctrl: c, pc: pc, relay: relay, done: make(chan struct{})}
	go func() {
		defer close(a.done)
		io.Copy(io.Discard, c)
		if !a.closing.Load() {
			a.ended.Store(true)
		}
	}()
	return a, nil
}

func (a *assoc) close() {
	a.closing.Store(true)
	a.ctrl.Close()
	a.pc.Close()
	<-a.done
}

// namer gives the names a worker asks, in wire format: next appends one
// to b, or returns nil when there are no more.
type namer interface {
	next(b []byte) []byte
}

// warmNames asks a fixed set of names in turn, from an offset, without
// end (or once each, with once set).
type warmNames struct {
	names [][]byte
	i     int
	left  int // with once: names not yet given
	once  bool
}

func (w *warmNames) next(b []byte) []byte {
	if w.once {
		if w.left == 0 {
			return nil
		}
		w.left--
	}
	n := w.names[w.i%len(w.names)]
	w.i++
	return append(b, n...)
}

// coldNames asks a new name every time: a decimal counter label in front
// of a suffix unique to the worker and the run.
type coldNames struct {
	suffix []byte // wire format
	n      uint64
}

func (c *coldNames) next(b []byte) []byte {
	c.n++
	var d [20]byte
	s := strconv.AppendUint(d[:0], c.n, 10)
	b = append(b, byte(len(s)))
	b = append(b, s...)
	return append(b, c.suffix...)
}

// counts are a run's tallies, shared by its workers.
type counts struct {
	sent     atomic.Int64
	answered atomic.Int64 // a valid answer to a query in flight
	lost     atomic.Int64 // no answer within the timeout, or none before the association ended
	bad      atomic.Int64 // an answer that does not answer its query
	late     atomic.Int64 // an answer after its query was counted lost, or a second one
	firstBad atomic.Pointer[string]
}

func (c *counts) badAnswer(why string) {
	c.bad.Add(1)
	c.firstBad.CompareAndSwap(nil, &why)
}

// slot is one query in flight.
type slot struct {
	live bool
	id   uint16
	sent time.Duration // since the worker started
	want [4]byte
	name []byte // wire format
	pkt  []byte // the datagram: SOCKS5 UDP header and query
}

// worker keeps depth queries in flight on one association, sending a new
// one for each answer and for each query that gets none within timeout,
// while sending is set and its namer has names. It returns once nothing is
// in flight and it sends no more, or the association fails.
type worker struct {
	a       *assoc
	depth   int
	timeout time.Duration
	names   namer
	c       *counts
	sending *atomic.Bool
}

// scanEvery is how often a worker looks for queries past their timeout.
const scanEvery = 100 * time.Millisecond

func (w *worker) run() {
	owner := make([]int16, 1<<16) // query ID -> slot index, -1 for none
	for i := range owner {
		owner[i] = -1
	}
	slots := make([]slot, w.depth)
	for i := range slots {
		slots[i].name = make([]byte, 0, 256)
		slots[i].pkt = make([]byte, 0, 512)
	}
	start := time.Now()
	seq := uint16(os.Getpid() + int(start.UnixNano()))
	live := 0
	exhausted := false

	send := func(i int) {
		if exhausted || !w.sending.Load() {
			return
		}
		s := &slots[i]
		name := w.names.next(s.name[:0])
		if name == nil {
			exhausted = true
			return
		}
		seq++
		for owner[seq] >= 0 {
			seq++
		}
		s.live, s.id, s.name, s.want = true, seq, name, addressOf(name)
		owner[seq] = int16(i)
		live++
		s.pkt = appendQuery(appendSocksUDP(s.pkt[:0], dnsServer), seq, name)
		s.sent = time.Since(start)
		w.c.sent.Add(1)
		// A failed write is a lost query, counted when its timeout passes.
		w.a.pc.WriteToUDPAddrPort(s.pkt, w.a.relay)
	}
	free := func(s *slot) {
		s.live = false
		owner[s.id] = -1
		live--
	}

	for i := range slots {
		send(i)
	}
	buf := make([]byte, 2048)
	nextScan := scanEvery
	w.a.pc.SetReadDeadline(start.Add(nextScan))
	for live > 0 {
		n, _, err := w.a.pc.ReadFromUDPAddrPort(buf)
		now := time.Since(start)
		var ne net.Error
		switch {
		case err == nil:
			w.answer(buf[:n], owner, slots, free, send)
		case errors.As(err, &ne) && ne.Timeout():
		default:
			// The socket failed: nothing more arrives.
			for i := range slots {
				if slots[i].live {
					free(&slots[i])
					w.c.lost.Add(1)
				}
			}
			return
		}
		if now >= nextScan {
			for i := range slots {
				if s := &slots[i]; s.live && now-s.sent > w.timeout {
					free(s)
					w.c.lost.Add(1)
					send(i)
				}
			}
			nextScan = now + scanEvery
			w.a.pc.SetReadDeadline(start.Add(nextScan))
		}
	}
}

// answer takes one datagram from the relay.
func (w *worker) answer(b []byte, owner []int16, slots []slot, free func(*slot), send func(int)) {
	from, r, err := parseSocksUDP(b)
	if err != nil {
		w.c.badAnswer("a datagram that is not a SOCKS5 UDP reply for IPv4")
		return
	}
	if from != dnsServer {
		w.c.badAnswer("an answer from " + from.String())
		return
	}
	if len(r) < 2 {
		w.c.badAnswer("short")
		return
	}
	i := owner[uint16(r[0])<<8|uint16(r[1])]
	if i < 0 {
		w.c.late.Add(1)
		return
	}
	s := &slots[i]
	free(s)
	if err := checkReply(r, s.name, s.want); err != nil {
		w.c.badAnswer(err.Error())
	} else {
		w.c.answered.Add(1)
	}
	send(int(i))
}

// runWorkers runs one worker per association until they return.
func runWorkers(as []*assoc, depth int, timeout time.Duration, names func(k int) namer, c *counts, sending *atomic.Bool) *sync.WaitGroup {
	var wg sync.WaitGroup
	for k, a := range as {
		w := &worker{a: a, depth: depth, timeout: timeout, names: names(k), c: c, sending: sending}
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.run()
		}()
	}
	return &wg
}
