package dns

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mdns "github.com/miekg/dns"
	"go.uber.org/goleak"

	"switchyard/netx"
)

// udpStub is a UDP server on loopback whose replies a test decides: reply
// runs on the stub's goroutine for every query datagram.
type udpStub struct {
	pc    net.PacketConn
	addr  netip.AddrPort
	reply func(s *udpStub, from net.Addr, q *mdns.Msg)
	wg    sync.WaitGroup // the stub's goroutines
	mu    sync.Mutex
	seen  []*mdns.Msg // every query received, in order
}

func startStub(t *testing.T, reply func(s *udpStub, from net.Addr, q *mdns.Msg)) *udpStub {
	t.Helper()
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &udpStub{pc: pc, addr: netip.MustParseAddrPort(pc.LocalAddr().String()), reply: reply}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		buf := make([]byte, maxMessage)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			q := new(mdns.Msg)
			if q.Unpack(buf[:n]) != nil {
				continue
			}
			s.mu.Lock()
			s.seen = append(s.seen, q)
			s.mu.Unlock()
			s.reply(s, from, q)
		}
	}()
	t.Cleanup(func() {
		pc.Close()
		s.wg.Wait()
	})
	return s
}

func (s *udpStub) send(to net.Addr, m *mdns.Msg) {
	b, err := m.Pack()
	if err != nil {
		panic(err)
	}
	s.pc.WriteTo(b, to)
}

// later sends m after d, on a goroutine of the stub's.
func (s *udpStub) later(d time.Duration, to net.Addr, m *mdns.Msg) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		time.Sleep(d)
		s.send(to, m)
	}()
}

func (s *udpStub) queries() []*mdns.Msg {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*mdns.Msg(nil), s.seen...)
}

// replyA is the answer to q: one A record of ip.
func replyA(q *mdns.Msg, ip string) *mdns.Msg {
	m := new(mdns.Msg)
	m.SetReply(q)
	m.Answer = append(m.Answer, rr(q.Question[0].Name+" 60 IN A "+ip))
	return m
}

// ipOf is the address the stub gives name n<i>.test.
func ipOf(i int) string { return fmt.Sprintf("10.%d.%d.1", i/256, i%256) }

var errInjected = errors.New("injected read error")

// faultDialer opens UDP sockets whose reads a test can break, and keeps
// them.
type faultDialer struct {
	mu    sync.Mutex
	conns []*faultConn
}

type faultConn struct {
	net.Conn
	broken atomic.Bool
	closed atomic.Bool
}

func (d *faultDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	var nd net.Dialer
	c, err := nd.DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	fc := &faultConn{Conn: c}
	d.mu.Lock()
	d.conns = append(d.conns, fc)
	d.mu.Unlock()
	return fc, nil
}

func (d *faultDialer) dialed() []*faultConn {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]*faultConn(nil), d.conns...)
}

func (c *faultConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if c.broken.Load() {
		return 0, errInjected
	}
	return n, err
}

// breakRead makes the blocked read, and every later one, fail.
func (c *faultConn) breakRead() {
	c.broken.Store(true)
	c.Conn.SetReadDeadline(aLongTimeAgo)
}

func (c *faultConn) Close() error {
	c.closed.Store(true)
	return c.Conn.Close()
}

func udpClient(t *testing.T, a netip.AddrPort, d Dialer, timeout time.Duration) *Client {
	t.Helper()
	c := NewClient(mustServer(t, "udp://"+a.String()), Options{Dialer: d, Timeout: timeout})
	t.Cleanup(func() { c.Close() })
	return c
}

// eventually waits up to 5 s for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for start := time.Now(); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Since(start) > 5*time.Second {
			t.Fatalf("%s: not after 5 s", what)
		}
	}
}

func (c *Client) udpSockets() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.udp)
}

func TestUDPExchangesShareOneSocket(t *testing.T) {
	const n = 500
	stub := startStub(t, func(s *udpStub, from net.Addr, q *mdns.Msg) {
		var i int
		fmt.Sscanf(q.Question[0].Name, "n%d.test.", &i)
		// Out of order: each after a random delay.
		s.later(time.Duration(rand.IntN(50))*time.Millisecond, from, replyA(q, ipOf(i)))
	})
	cd := &countingDialer{d: PolicyDialer(netx.NewDialer(netx.SocketPolicy{}, 0))}
	c := udpClient(t, stub.addr, cd, 5*time.Second)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			q := question(fmt.Sprintf("n%d.test", i), mdns.TypeA)
			q.Id = uint16(i)
			resp, err := c.Exchange(ctxT(t), q)
			if err != nil {
				errs <- err
				return
			}
			if resp.Id != uint16(i) || len(resp.Answer) != 1 || resp.Answer[0].(*mdns.A).A.String() != ipOf(i) {
				errs <- fmt.Errorf("n%d: answer %v", i, resp)
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := cd.count("udp"); got != 1 {
		t.Errorf("%d udp sockets, want 1", got)
	}
	if got := len(stub.queries()); got != n {
		t.Errorf("the stub saw %d queries, want %d (no retransmits)", got, n)
	}
}

func TestUDPIgnoresSpoofedAnswers(t *testing.T) {
	stub := startStub(t, func(s *udpStub, from net.Addr, q *mdns.Msg) {
		// The right ID, the wrong question.
		spoof := new(mdns.Msg)
		spoof.SetReply(question("evil.test", mdns.TypeA))
		spoof.Id = q.Id
		spoof.Answer = append(spoof.Answer, rr("a.test. 60 IN A 198.51.100.66"))
		s.send(from, spoof)
		// The right ID, not a message.
		s.pc.WriteTo([]byte{byte(q.Id >> 8), byte(q.Id), 0x81, 0x80, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 1}, from)
		// A response with no question and NOERROR.
		empty := new(mdns.Msg)
		empty.Id, empty.Response = q.Id, true
		s.send(from, empty)
		s.later(20*time.Millisecond, from, replyA(q, "192.0.2.1"))
	})
	c := udpClient(t, stub.addr, nil, 5*time.Second)
	resp, err := c.Exchange(ctxT(t), question("a.test", mdns.TypeA))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Answer) != 1 || resp.Answer[0].(*mdns.A).A.String() != "192.0.2.1" {
		t.Fatalf("answer %v", resp)
	}
}

func TestUDPRetransmitsALostQuery(t *testing.T) {
	var got atomic.Int32
	stub := startStub(t, func(s *udpStub, from net.Addr, q *mdns.Msg) {
		if got.Add(1) == 1 {
			return // lost
		}
		s.send(from, replyA(q, "192.0.2.1"))
	})
	c := udpClient(t, stub.addr, nil, 5*time.Second)
	start := time.Now()
	resp, err := c.Exchange(ctxT(t), question("a.test", mdns.TypeA))
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < udpRetransmit || took > udpRetransmit+time.Second {
		t.Errorf("answered after %v, want about %v", took, udpRetransmit)
	}
	if len(resp.Answer) != 1 {
		t.Fatalf("answer %v", resp)
	}
	qs := stub.queries()
	if len(qs) != 2 || qs[0].Id != qs[1].Id {
		t.Errorf("the stub saw %d queries; want the same one twice", len(qs))
	}
}

func TestUDPRedialsAfterReadError(t *testing.T) {
	held := make(chan struct{}, 1)
	stub := startStub(t, func(s *udpStub, from net.Addr, q *mdns.Msg) {
		if q.Question[0].Name == "hold.test." {
			select {
			case held <- struct{}{}:
			default: // a retransmission
			}
			return // never answered
		}
		s.send(from, replyA(q, "192.0.2.1"))
	})
	fd := &faultDialer{}
	c := udpClient(t, stub.addr, fd, 5*time.Second)
	if _, err := c.Exchange(ctxT(t), question("a.test", mdns.TypeA)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.Exchange(ctxT(t), question("hold.test", mdns.TypeA))
		done <- err
	}()
	<-held
	first := fd.dialed()[0]
	first.breakRead()
	select {
	case err := <-done:
		if !errors.Is(err, errInjected) {
			t.Errorf("the waiting exchange: %v, want the read error", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the waiting exchange did not end with the read error")
	}
	if !first.closed.Load() {
		t.Error("the failed socket is open")
	}
	if _, err := c.Exchange(ctxT(t), question("b.test", mdns.TypeA)); err != nil {
		t.Fatal(err)
	}
	if n := len(fd.dialed()); n != 2 {
		t.Errorf("%d sockets dialed, want 2", n)
	}
}

func TestUDPIdleSocketCloses(t *testing.T) {
	stub := startStub(t, func(s *udpStub, from net.Addr, q *mdns.Msg) { s.send(from, replyA(q, "192.0.2.1")) })
	fd := &faultDialer{}
	c := udpClient(t, stub.addr, fd, 5*time.Second)
	c.udpIdle = 200 * time.Millisecond
	// Exchanges more often than the idle time keep the socket.
	for range 5 {
		if _, err := c.Exchange(ctxT(t), question("a.test", mdns.TypeA)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(c.udpIdle / 2)
	}
	if n := len(fd.dialed()); n != 1 {
		t.Fatalf("%d sockets dialed while in use, want 1", n)
	}
	first := fd.dialed()[0]
	eventually(t, "idle close", func() bool { return first.closed.Load() && c.udpSockets() == 0 })
	if _, err := c.Exchange(ctxT(t), question("a.test", mdns.TypeA)); err != nil {
		t.Fatal(err)
	}
	if n := len(fd.dialed()); n != 2 {
		t.Errorf("%d sockets dialed, want 2", n)
	}
}

func TestUDPCloseEndsTheReader(t *testing.T) {
	held := make(chan struct{}, 1)
	stub := startStub(t, func(s *udpStub, from net.Addr, q *mdns.Msg) {
		if q.Question[0].Name == "hold.test." {
			select {
			case held <- struct{}{}:
			default: // a retransmission
			}
			return
		}
		s.send(from, replyA(q, "192.0.2.1"))
	})
	ignore := goleak.IgnoreCurrent()
	c := NewClient(mustServer(t, "udp://"+stub.addr.String()), Options{Timeout: 5 * time.Second})
	if _, err := c.Exchange(ctxT(t), question("a.test", mdns.TypeA)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.Exchange(context.Background(), question("hold.test", mdns.TypeA))
		done <- err
	}()
	<-held
	c.Close()
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Errorf("the exchange in flight: %v, want ErrClosed", err)
	}
	goleak.VerifyNone(t, ignore)
	if _, err := c.Exchange(ctxT(t), question("a.test", mdns.TypeA)); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
}

func TestUDPCancelLeavesTheSocket(t *testing.T) {
	held := make(chan struct{}, 1)
	stub := startStub(t, func(s *udpStub, from net.Addr, q *mdns.Msg) {
		if q.Question[0].Name == "hold.test." {
			select {
			case held <- struct{}{}:
			default: // a retransmission
			}
			return
		}
		s.send(from, replyA(q, "192.0.2.1"))
	})
	fd := &faultDialer{}
	c := udpClient(t, stub.addr, fd, 5*time.Second)
	ctx, cancel := context.WithCancel(ctxT(t))
	done := make(chan error, 1)
	go func() {
		_, err := c.Exchange(ctx, question("hold.test", mdns.TypeA))
		done <- err
	}()
	<-held
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled exchange: %v", err)
	}
	if _, err := c.Exchange(ctxT(t), question("a.test", mdns.TypeA)); err != nil {
		t.Fatal(err)
	}
	if n := len(fd.dialed()); n != 1 {
		t.Errorf("%d sockets dialed, want 1", n)
	}
	c.mu.Lock()
	s := c.udp[stub.addr]
	c.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.waiters) != 0 {
		t.Errorf("%d waiters left", len(s.waiters))
	}
}

func TestUDPWaitersBounded(t *testing.T) {
	stub := startStub(t, func(s *udpStub, from net.Addr, q *mdns.Msg) { s.send(from, replyA(q, "192.0.2.1")) })
	c := udpClient(t, stub.addr, nil, 5*time.Second)
	if _, err := c.Exchange(ctxT(t), question("a.test", mdns.TypeA)); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	s := c.udp[stub.addr]
	c.mu.Unlock()
	s.mu.Lock()
	for i := range maxUDPWaiters {
		s.waiters[uint16(i)] = &udpWaiter{ch: make(chan udpResult, 1)}
	}
	s.mu.Unlock()
	start := time.Now()
	if _, err := c.Exchange(ctxT(t), question("a.test", mdns.TypeA)); !errors.Is(err, errTooManyInFlight) {
		t.Errorf("err = %v, want errTooManyInFlight", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("failed after %v", took)
	}
}
