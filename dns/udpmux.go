package dns

import (
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"

	mdns "github.com/miekg/dns"

	"switchyard/netx"
)

// A UDP server's exchanges share one connected socket per server address
// (a udpSock), opened with the client's Dialer by the first exchange that
// needs it while the others wait. Each exchange registers under an ID
// chosen at random among those not in flight on the socket, writes its
// query, and waits for its answer, sending the same bytes again every
// udpRetransmit until its context ends. The socket's reader goroutine
// reads every datagram, unpacks it and hands it to the exchange waiting
// under its ID when it answers that exchange's question (answers); others
// (unparseable, unknown ID, wrong question: late or spoofed) are dropped.
//
// A socket is replaced when it fails: on a read or write error every
// exchange waiting on it gets the error, and the next exchange dials a new
// one. It is closed after udpIdleTimeout without an exchange, and by
// Client.Close, which waits for its reader.
const (
	// udpIdleTimeout is how long a shared socket stays open with no
	// exchange registered on it.
	udpIdleTimeout = 30 * time.Second
	// maxUDPWaiters bounds the exchanges in flight on one socket; beyond
	// it an exchange fails at once with errTooManyInFlight. It is far
	// above a resolver's maxFlights, and leaves most of the 16-bit ID
	// space free so that a random pick rarely collides.
	maxUDPWaiters = 4096
)

var errTooManyInFlight = errors.New("too many queries in flight on the udp socket")

// errSockGone tells an exchange that the socket it took was closed before
// it registered: it takes another.
var errSockGone = errors.New("dns: udp socket gone")

// udpSock is a connected UDP socket to one server address shared by the
// client's exchanges.
type udpSock struct {
	c  *Client
	to netip.AddrPort
	// ready is closed once the dial ended: conn or dialErr is set.
	ready   chan struct{}
	conn    net.Conn
	dialErr error

	mu      sync.Mutex // guards the fields below; never held across I/O
	waiters map[uint16]*udpWaiter
	lastUse time.Time // when an exchange last registered
	err     error     // why the socket is done; nil while it is usable
}

// udpWaiter is one exchange waiting for its answer.
type udpWaiter struct {
	q  mdns.Question
	ch chan udpResult // buffered: the one send never blocks
}

type udpResult struct {
	resp *mdns.Msg
	err  error
}

// exchangeUDP sends wire (the query, of question q) to the server at to
// on the shared socket and returns the answer. It writes the ID it chose
// into wire and returns it.
func (c *Client) exchangeUDP(ctx context.Context, to netip.AddrPort, wire []byte, q mdns.Question) (*mdns.Msg, uint16, error) {
	for {
		s, err := c.udpSocket(ctx, to)
		if err != nil {
			return nil, 0, err
		}
		resp, id, err := s.exchange(ctx, wire, q)
		if err == errSockGone {
			continue
		}
		return resp, id, err
	}
}

// udpSocket returns the shared socket to the address to, dialing it when
// there is none; concurrent callers wait for one dial.
func (c *Client) udpSocket(ctx context.Context, to netip.AddrPort) (*udpSock, error) {
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, ErrClosed
		}
		s := c.udp[to]
		if s == nil {
			s = &udpSock{c: c, to: to, ready: make(chan struct{}), waiters: make(map[uint16]*udpWaiter)}
			if c.udp == nil {
				c.udp = make(map[netip.AddrPort]*udpSock)
			}
			c.udp[to] = s
			c.mu.Unlock()
			return s, c.dialUDP(ctx, s)
		}
		c.mu.Unlock()
		select {
		case <-s.ready:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
		if s.dialErr == nil {
			return s, nil
		}
		// The dial failed; when it failed with the dialing exchange's
		// context, this one (still alive) dials again.
		if ctx.Err() != nil || !(errors.Is(s.dialErr, context.Canceled) || errors.Is(s.dialErr, context.DeadlineExceeded)) {
			return nil, s.dialErr
		}
	}
}

// dialUDP opens s's socket and starts its reader; on failure s leaves the
// client's table.
func (c *Client) dialUDP(ctx context.Context, s *udpSock) error {
	conn, err := c.dialer.DialContext(ctx, "udp", s.to.String())
	c.mu.Lock()
	if err == nil && c.closed {
		err = ErrClosed
	}
	if err != nil {
		if c.udp[s.to] == s {
			delete(c.udp, s.to)
		}
		s.dialErr = err
		c.mu.Unlock()
		close(s.ready)
		if conn != nil {
			conn.Close()
		}
		return err
	}
	s.conn = conn
	s.lastUse = time.Now()
	c.readers.Add(1)
	c.mu.Unlock()
	close(s.ready)
	go s.read()
	return nil
}

// exchange registers the query under a free ID, sends it (again every
// udpRetransmit) and waits for the answer or the end of ctx.
func (s *udpSock) exchange(ctx context.Context, wire []byte, q mdns.Question) (*mdns.Msg, uint16, error) {
	w := &udpWaiter{q: q, ch: make(chan udpResult, 1)}
	now := time.Now()
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return nil, 0, errSockGone
	}
	if len(s.waiters) >= maxUDPWaiters {
		s.mu.Unlock()
		return nil, 0, errTooManyInFlight
	}
	id := uint16(rand.Uint32())
	for s.waiters[id] != nil {
		id = uint16(rand.Uint32())
	}
	s.waiters[id] = w
	s.lastUse = now
	s.mu.Unlock()
	binary.BigEndian.PutUint16(wire, id)

	deadline, _ := ctx.Deadline() // Exchange set one
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		if _, err := s.conn.Write(wire); err != nil {
			s.fail(err)
			// fail handed the error to w, unless the reader took w or
			// the socket was already done.
			return nil, id, s.leave(id, w, err)
		}
		wait := udpRetransmit
		if d := time.Until(deadline); d < wait {
			wait = d
		}
		if timer == nil {
			timer = time.NewTimer(wait)
		} else {
			timer.Reset(wait)
		}
		select {
		case r := <-w.ch:
			return r.resp, id, r.err
		case <-ctx.Done():
			return nil, id, s.leave(id, w, context.Cause(ctx))
		case <-timer.C:
			if ctx.Err() != nil {
				return nil, id, s.leave(id, w, context.Cause(ctx))
			}
			// No answer yet: send the same query again.
		}
	}
}

// leave takes w out of the table when it is still there and returns err;
// when it is not, a result was or is being handed to w, and leave returns
// that result's error (or err, when the result was an answer: the
// exchange is over regardless).
func (s *udpSock) leave(id uint16, w *udpWaiter, err error) error {
	s.mu.Lock()
	mine := s.waiters[id] == w
	if mine {
		delete(s.waiters, id)
	}
	s.mu.Unlock()
	if mine {
		return err
	}
	if r := <-w.ch; r.err != nil {
		return r.err
	}
	return err
}

// read hands the socket's datagrams to the waiting exchanges until the
// socket fails, is closed, or stays idle for the client's udpIdle.
func (s *udpSock) read() {
	defer s.c.readers.Done()
	bp := netx.GetBuf(maxMessage)
	defer netx.PutBuf(bp)
	buf := *bp
	idle := s.c.udpIdle
	s.conn.SetReadDeadline(time.Now().Add(idle))
	for {
		n, err := s.conn.Read(buf)
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				if next, ok := s.stillUsed(idle); ok {
					s.conn.SetReadDeadline(next)
					continue
				}
				return
			}
			s.fail(err)
			return
		}
		if n < 12 {
			continue
		}
		id := binary.BigEndian.Uint16(buf)
		s.mu.Lock()
		known := s.waiters[id] != nil
		s.mu.Unlock()
		if !known {
			continue // late (its exchange ended) or not ours
		}
		resp := new(mdns.Msg)
		if resp.Unpack(buf[:n]) != nil {
			continue
		}
		s.mu.Lock()
		w := s.waiters[id]
		if w == nil || !answers(resp, id, w.q) {
			s.mu.Unlock()
			continue
		}
		delete(s.waiters, id)
		s.mu.Unlock()
		w.ch <- udpResult{resp: resp}
	}
}

// stillUsed is called when the reader's deadline passed. It returns the
// next deadline while the socket is in use; else it closes the socket.
func (s *udpSock) stillUsed(idle time.Duration) (time.Time, bool) {
	now := time.Now()
	c := s.c
	c.mu.Lock()
	s.mu.Lock()
	if s.err != nil { // failed or closed meanwhile
		s.mu.Unlock()
		c.mu.Unlock()
		return time.Time{}, false
	}
	if len(s.waiters) > 0 {
		s.mu.Unlock()
		c.mu.Unlock()
		return now.Add(idle), true
	}
	if next := s.lastUse.Add(idle); next.After(now) {
		s.mu.Unlock()
		c.mu.Unlock()
		return next, true
	}
	s.err = errSockGone
	if c.udp[s.to] == s {
		delete(c.udp, s.to)
	}
	s.mu.Unlock()
	c.mu.Unlock()
	s.conn.Close()
	return time.Time{}, false
}

// fail ends the socket after an I/O error: it leaves the client's table
// (the next exchange dials anew), every waiting exchange gets err, and it
// is closed. It does nothing when the socket is done already.
func (s *udpSock) fail(err error) {
	c := s.c
	c.mu.Lock()
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		c.mu.Unlock()
		return
	}
	s.err = err
	waiters := s.waiters
	s.waiters = nil
	if c.udp[s.to] == s {
		delete(c.udp, s.to)
	}
	s.mu.Unlock()
	c.mu.Unlock()
	for _, w := range waiters {
		w.ch <- udpResult{err: err}
	}
	s.conn.Close()
}

// closeUDP closes the client's shared sockets, fails the exchanges waiting
// on them with ErrClosed and waits for their readers. The caller has set
// c.closed.
func (c *Client) closeUDP() {
	c.mu.Lock()
	socks := c.udp
	c.udp = nil
	var conns []net.Conn
	var waiting []*udpWaiter
	for _, s := range socks {
		s.mu.Lock()
		if s.err == nil && s.conn != nil { // dialled and not done
			s.err = ErrClosed
			for _, w := range s.waiters {
				waiting = append(waiting, w)
			}
			s.waiters = nil
			conns = append(conns, s.conn)
		}
		s.mu.Unlock()
	}
	c.mu.Unlock()
	for _, w := range waiting {
		w.ch <- udpResult{err: ErrClosed}
	}
	for _, conn := range conns {
		conn.Close()
	}
	c.readers.Wait()
}
