package supervisor

// Score reporting on the TCP data path: the Score attempts a selection
// attached to its plan (plane.Query.Attempts) are begun right before the
// leaf's dial, and the flow's I/O boundary reports to them: set up at the
// dial's success, the first response byte, the bytes accepted up and
// delivered down, and one end.

import (
	"context"
	"errors"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"switchyard/netx"
	"switchyard/outbound"
	"switchyard/plane"
	"switchyard/relay"
)

// ProgressEvery is how often, at most, a flow publishes its byte progress
// to its Score reports (the first received bytes at once): the scorer's
// throughput windows are 1–10 s, so a quarter second is fine enough, and
// between publications a byte costs two atomic adds.
const ProgressEvery = 250 * time.Millisecond

// scoreFlow is one TCP flow's begun Score reports. Its I/O counters are
// atomics; the reports themselves are called under mu, which only a
// publication, the response and the end take.
type scoreFlow struct {
	mu   sync.Mutex
	reps [plane.MaxGroupDepth]plane.Report
	n    int
	done bool // ended: later events are dropped

	base      time.Time    // monotonic origin of last
	last      atomic.Int64 // nanoseconds since base of the last publication; -1: none yet
	tx, rx    atomic.Int64 // bytes since the last publication
	sent      atomic.Bool  // the relay took client data to send up (accepted from the client)
	responded atomic.Bool  // a response byte arrived
}

// beginScore begins every attempt q holds, at the flow's first physical or
// logical open, and forgets them in q. nil without attempts. A Begin error
// (a stale plan's typed cancellation) cancels what began, releases the
// rest and refuses the flow with that error.
func beginScore(q *plane.Query, at time.Time) (*scoreFlow, error) {
	as := &q.Attempts
	if as.Len() == 0 {
		return nil, nil
	}
	defer as.Reset()
	sf := &scoreFlow{base: at}
	sf.last.Store(-1)
	for i := 0; i < as.Len(); i++ {
		r, err := as.At(i).Begin(at)
		if err != nil {
			for _, b := range sf.reps[:sf.n] {
				b.Cancel(at)
			}
			for j := i + 1; j < as.Len(); j++ {
				as.At(j).Release(at)
			}
			return nil, err
		}
		sf.reps[sf.n] = r
		sf.n++
	}
	return sf, nil
}

// setup: the proxy session is set up (the dial succeeded).
func (sf *scoreFlow) setup(at time.Time) {
	sf.mu.Lock()
	defer sf.mu.Unlock()
	if sf.done {
		return
	}
	for _, r := range sf.reps[:sf.n] {
		r.Setup(at)
	}
}

// sending notes that the relay took client data to send up: the client's
// bytes, accepted from the client, whether or not the upstream has taken
// them yet. A protocol that sends its request header at dial time (VLESS)
// lets a server that ends the stream on the header alone close before the
// relay's write of the client's first bytes returns; that end still comes
// after the client's data.
func (sf *scoreFlow) sending() {
	if !sf.sent.Load() {
		sf.sent.Store(true)
	}
}

// up counts n bytes the upstream accepted; down n bytes it delivered.
func (sf *scoreFlow) up(n int64) {
	if n <= 0 {
		return
	}
	sf.sending()
	sf.tx.Add(n)
	sf.maybePublish(false)
}

func (sf *scoreFlow) down(n int64) {
	if n <= 0 {
		return
	}
	sf.rx.Add(n)
	if !sf.responded.Load() && sf.responded.CompareAndSwap(false, true) {
		now := time.Now()
		sf.mu.Lock()
		if !sf.done {
			for _, r := range sf.reps[:sf.n] {
				r.Response(now)
			}
		}
		sf.mu.Unlock()
		sf.publish(now)
		return
	}
	sf.maybePublish(true)
}

// maybePublish publishes the progress when ProgressEvery passed since the
// last publication, or at once for the first received bytes.
func (sf *scoreFlow) maybePublish(rx bool) {
	now := time.Now()
	last := sf.last.Load()
	if last >= 0 && now.Sub(sf.base)-time.Duration(last) < ProgressEvery {
		return
	}
	if last < 0 && !rx {
		// The first publication waits for received bytes or the
		// interval from the flow's start.
		if now.Sub(sf.base) < ProgressEvery {
			return
		}
	}
	if sf.last.CompareAndSwap(last, int64(now.Sub(sf.base))) {
		sf.publish(now)
	}
}

// publish hands the counted bytes to the reports.
func (sf *scoreFlow) publish(at time.Time) {
	sf.last.Store(int64(at.Sub(sf.base)))
	sf.mu.Lock()
	defer sf.mu.Unlock()
	tx, rx := sf.tx.Swap(0), sf.rx.Swap(0)
	if sf.done || tx == 0 && rx == 0 {
		return
	}
	for _, r := range sf.reps[:sf.n] {
		r.Progress(at, tx, rx)
	}
}

// end ends every report once: fail with err when set, settle or cancel.
func (sf *scoreFlow) end(at time.Time, how endHow, err error) {
	sf.mu.Lock()
	defer sf.mu.Unlock()
	if sf.done {
		return
	}
	if tx, rx := sf.tx.Swap(0), sf.rx.Swap(0); tx != 0 || rx != 0 {
		for _, r := range sf.reps[:sf.n] {
			r.Progress(at, tx, rx)
		}
	}
	sf.done = true
	for _, r := range sf.reps[:sf.n] {
		switch how {
		case endFail:
			r.Fail(at, err)
		case endSettle:
			r.Settle(at)
		default:
			r.Cancel(at)
		}
	}
}

type endHow uint8

const (
	endCancel endHow = iota
	endSettle
	endFail
)

// dialed ends or sets up the reports after the leaf's dial returned err:
// set up on success; cancelled when the dial's failure is none of the
// upstream's (the client left, a reload overtook it, a local refusal, the
// admission's capacity ran out before a physical attempt began); failed
// otherwise, before setup.
func (sf *scoreFlow) dialed(at time.Time, err error, neutral bool) {
	switch {
	case err == nil:
		sf.setup(at)
	case neutral:
		sf.end(at, endCancel, nil)
	default:
		sf.end(at, endFail, err)
	}
}

// neutralDialError reports whether a dial's failure is no evidence against
// the upstream, for Score: it earns no failure and permits no retry. The
// client left (ctx), a reload overtook the dial, a local refusal, or the
// establishment expired while still waiting for physical admission (a
// local capacity refusal, not a timeout of the node; an expiry while
// resolving the server stays an ordinary timeout).
func neutralDialError(ctx, dctx context.Context, est *netx.Establishment, err error) bool {
	return ctx.Err() != nil || plane.Reloaded(err) || localRefusal(err) ||
		est.Expired(dctx) && est.Phase() == netx.PhaseAdmission
}

// localRefusal reports whether a dial's failure is this process's own
// refusal: a route's block, or dial admission that ran out waiting (a
// capacity refusal, netx.FaultLocalRefusal). It is terminal: no retry.
func localRefusal(err error) bool {
	f, _ := netx.FaultOf(err)
	return errors.Is(err, outbound.ErrBlocked) || f == netx.FaultLocalRefusal
}

// relayEnded ends the reports as the relay classified the flow's end:
//
//   - an error on the client's side cancels (neutral: a reset, an abort,
//     a broken pipe; the relay classified it for health already);
//   - an error on the upstream's side fails with that error;
//   - the upstream's end of stream after the relay took client data to
//     send up (not only once the upstream accepted it) and before any
//     response byte fails as a silent target (plane.ErrNoResponse, an I/O
//     failure of the flow's target);
//   - any other end of stream settles, the client's own after a response
//     (a client that closed before any response cancels: it proves
//     nothing of the upstream);
//   - an idle end settles a flow that had its response and cancels one
//     that had none; an owner's stop (reload, drain, kill, shutdown)
//     cancels.
func (sf *scoreFlow) relayEnded(at time.Time, e relay.End) {
	responded := sf.responded.Load()
	switch {
	case e.By == relay.EndClient && e.Err == nil && responded:
		sf.end(at, endSettle, nil)
	case e.By == relay.EndUpstream && e.Err != nil:
		sf.end(at, endFail, e.Err)
	case e.By == relay.EndUpstream && sf.sent.Load() && !responded:
		sf.end(at, endFail, plane.ErrNoResponse)
	case e.By == relay.EndUpstream:
		sf.end(at, endSettle, nil)
	case e.By == relay.EndIdle && responded:
		sf.end(at, endSettle, nil)
	default:
		sf.end(at, endCancel, nil)
	}
}

// scoreConn is the upstream conn of a flow with Score reports. It only
// observes bytes (netx.Observed), so a relay may splice beneath it and
// report what it moved.
type scoreConn struct {
	net.Conn
	sf *scoreFlow
}

var _ netx.Observed = (*scoreConn)(nil)

// watchScore wraps c so its I/O reports to sf. A flow that ends without a
// relay telling how (its setup failed after the dial) is cancelled once
// the wrapper is dropped.
func watchScore(c net.Conn, sf *scoreFlow) net.Conn {
	if sf == nil {
		return c
	}
	sc := &scoreConn{Conn: c, sf: sf}
	runtime.AddCleanup(sc, func(sf *scoreFlow) { sf.end(time.Now(), endCancel, nil) }, sf)
	return sc
}

func (c *scoreConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.sf.down(int64(n))
	return n, err
}

func (c *scoreConn) Write(p []byte) (int, error) {
	if len(p) > 0 {
		c.sf.sending()
	}
	n, err := c.Conn.Write(p)
	c.sf.up(int64(n))
	return n, err
}

// CloseWrite half-closes the inner conn when it can.
func (c *scoreConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errNoHalfClose
}

var errNoHalfClose = errors.New("the connection cannot half-close")

func (c *scoreConn) NetConn() net.Conn    { return c.Conn }
func (c *scoreConn) ObserveRead(n int64)  { c.sf.down(n) }
func (c *scoreConn) ObserveWrite(n int64) { c.sf.up(n) }
