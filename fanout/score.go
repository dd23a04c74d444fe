package fanout

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"switchyard/plane"
)

// # Score reports of a sub-link
//
// A packet whose selection went through Score groups carries their
// attempts (plane.Query.Attempts, one per group). When that packet opens a
// sub-link, the sub-link owns them: they are begun when the sub-link's
// node-specific work starts (its open, before the dial), and the sub-link
// is from then on the flow every one of them reports on:
//
//	Setup      the dial returned the packet link (the packet path is open)
//	Progress   bytes accepted by a send, bytes of replies delivered to the
//	           client; the first of each at once, then at most every
//	           progressEvery (a per-packet cost of two atomic adds and a
//	           clock read, no lock, no allocation)
//	Response   the first reply delivered
//	Fail       the open failed; a send or the link's receive failed for
//	           the upstream; no reply came within ReplyTimeout of the
//	           first accepted send (ErrNoReply, a timeout: UnknownPreSetup
//	           before setup, FlowIO after it)
//	Settle     the sub-link ended on purpose (eviction, a drain, a kill or
//	           interruption through the tracker, the association's end)
//	           after a reply: intentional retirement is successful after a
//	           reply
//	Cancel     the same without a reply (neutral); a cancelled or
//	           reload-overtaken open; packet-local congestion on send
//	           (ENOBUFS, EAGAIN)
//
// Exactly one of the last three ends it. The Report classifies a Fail's
// error (group/score.Classify): typed local refusals in it (dial
// admission, a datagram too large for the protocol) stay neutral there.
// A refused Begin (the plan went stale) refuses the sub-link: its packets
// are dropped, counted, and nothing is dialed; the next packet is routed
// again. A packet routed to a sub-link that exists, or that opens nothing
// (no leaf, a full queue, a version backing off, a closed link), releases
// its attempts at once: a sub-link keeps the report of the packet that
// opened it, and one flow is never reported twice. A cold URLTest
// preparation races several leaves, none of them the plan an attempt was
// made for: its attempts are released too.
//
// A sub-link is keyed by outbound version, so peers routed to the same
// leaf share it and its report: the replies it counts are every reply the
// sub-link delivers. A shared source's loss (a Hysteria 2 connection, an
// XUDP session's END|ERROR) reaches every sub-link bound to it as one
// error value carrying the source's episode, so each bound flow's Fail
// reports that one episode.
//
// The reply deadline runs on a runtime timer (time.AfterFunc), no
// goroutine: it is stopped by the first reply and by the report's end, and
// a late firing finds the report ended and does nothing. It only ends the
// report; the sub-link stays as it is (the next packet is routed again in
// any case, so a Score group that now prefers another leaf moves the peer
// there).

// ReplyTimeout is how long after its first accepted send a sub-link that
// carries Score reports waits for a reply before its reports fail with
// ErrNoReply. The request/response protocols UDP carries answer within a
// few round trips, and their clients give up about here: a DNS stub
// retransmits for a few seconds and then fails (this process's own
// resolver asks for 5 s), a QUIC client's handshake gives up after 10 s
// without an answer. Ten seconds is well past a slow proxy's round trip
// and well before an application has moved on.
const ReplyTimeout = 10 * time.Second

// replyTimeout is ReplyTimeout; tests shorten it.
var replyTimeout = ReplyTimeout

// progressEvery bounds how often a sub-link publishes its byte counts
// after the first of each direction: well inside the scorer's 1 s RX
// publication throttle and its 1–10 s throughput windows, while a busy
// sub-link takes the report's locks at most ten times a second, not once
// per packet.
const progressEvery = 100 * time.Millisecond

// ErrNoReply fails the reports of a sub-link that sent and got no reply
// within ReplyTimeout. It is a timeout (net.Error).
var ErrNoReply error = noReplyError{}

type noReplyError struct{}

func (noReplyError) Error() string {
	return fmt.Sprintf("udp fan-out: no reply within %s of the first datagram", ReplyTimeout)
}
func (noReplyError) Timeout() bool   { return true }
func (noReplyError) Temporary() bool { return true }

// flowReport is the begun attempts of the selection that opened one
// sub-link.
type flowReport struct {
	mu   sync.Mutex // serializes the calls on reps
	reps [plane.MaxGroupDepth]plane.Report
	n    int

	tx, rx  atomic.Int64 // bytes counted and not yet published
	next    atomic.Int64 // unix nanoseconds before which counts wait
	replied atomic.Bool  // a reply was delivered (Response published)
	sent    atomic.Bool  // a send was accepted (the reply deadline armed)
	ended   atomic.Bool

	timer *time.Timer // the reply deadline; guarded by mu
}

// beginReport begins every attempt of as, which it empties. When one
// refuses, the begun ones are cancelled, the rest released, and its error
// returned. No attempts: nil, nil.
func beginReport(as *plane.Attempts, at time.Time) (*flowReport, error) {
	if as.Len() == 0 {
		return nil, nil
	}
	defer as.Reset()
	r := &flowReport{}
	for i := 0; i < as.Len(); i++ {
		rep, err := as.At(i).Begin(at)
		if err != nil {
			for j := 0; j < r.n; j++ {
				r.reps[j].Cancel(at)
			}
			for j := i + 1; j < as.Len(); j++ {
				as.At(j).Release(at)
			}
			return nil, err
		}
		r.reps[r.n] = rep
		r.n++
	}
	return r, nil
}

// releaseAttempts releases the attempts of a selection that opened nothing
// and empties as.
func releaseAttempts(as *plane.Attempts) {
	if as.Len() == 0 {
		return
	}
	at := time.Now()
	for i := 0; i < as.Len(); i++ {
		as.At(i).Release(at)
	}
	as.Reset()
}

// setup publishes the packet path open.
func (r *flowReport) setup(at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended.Load() {
		return
	}
	for _, rep := range r.reps[:r.n] {
		rep.Setup(at)
	}
}

// sentBytes counts n bytes a send accepted. The first arms the reply
// deadline.
func (r *flowReport) sentBytes(n int) {
	r.tx.Add(int64(n))
	now := time.Now()
	if !r.sent.Load() && r.sent.CompareAndSwap(false, true) {
		r.armReply()
		r.publish(now)
		return
	}
	if now.UnixNano() >= r.next.Load() {
		r.publish(now)
	}
}

// deliveredBytes counts a reply of n bytes handed to the client; the first
// publishes the response.
func (r *flowReport) deliveredBytes(n int) {
	r.rx.Add(int64(n))
	now := time.Now()
	if !r.replied.Load() && r.replied.CompareAndSwap(false, true) {
		r.respond(now)
		return
	}
	if now.UnixNano() >= r.next.Load() {
		r.publish(now)
	}
}

// respond publishes the first response, stops the reply deadline and
// publishes the counts.
func (r *flowReport) respond(at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended.Load() {
		return
	}
	if r.timer != nil {
		r.timer.Stop()
	}
	r.publishLocked(at)
	for _, rep := range r.reps[:r.n] {
		rep.Response(at)
	}
}

func (r *flowReport) armReply() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.ended.Load() && !r.replied.Load() {
		r.timer = time.AfterFunc(replyTimeout, r.expire)
	}
}

// expire fails the report when no reply came.
func (r *flowReport) expire() {
	if !r.replied.Load() {
		r.fail(ErrNoReply)
	}
}

func (r *flowReport) publish(at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.ended.Load() {
		r.publishLocked(at)
	}
}

// publishLocked hands the counted bytes on. Callers hold mu.
func (r *flowReport) publishLocked(at time.Time) {
	r.next.Store(at.Add(progressEvery).UnixNano())
	tx, rx := r.tx.Swap(0), r.rx.Swap(0)
	if tx == 0 && rx == 0 {
		return
	}
	for _, rep := range r.reps[:r.n] {
		rep.Progress(at, tx, rx)
	}
}

// end ends the report once, with the last counts published first.
func (r *flowReport) end(how func(plane.Report, time.Time)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended.Load() {
		return
	}
	at := time.Now()
	r.publishLocked(at)
	r.ended.Store(true)
	if r.timer != nil {
		r.timer.Stop()
	}
	for _, rep := range r.reps[:r.n] {
		how(rep, at)
	}
}

// fail ends the report with an upstream failure.
func (r *flowReport) fail(err error) {
	r.end(func(rep plane.Report, at time.Time) { rep.Fail(at, err) })
}

// cancel ends the report neutrally.
func (r *flowReport) cancel() {
	r.end(func(rep plane.Report, at time.Time) { rep.Cancel(at) })
}

// retire ends the report of a sub-link closed on purpose: successful after
// a reply, neutral without one.
func (r *flowReport) retire() {
	if r.replied.Load() {
		r.end(func(rep plane.Report, at time.Time) { rep.Settle(at) })
		return
	}
	r.cancel()
}

// sendFailed ends the report of a sub-link whose send failed with err: a
// link closed on this side (a drain, a kill) is a retirement, packet-local
// congestion neutral, anything else the upstream's failure.
func (r *flowReport) sendFailed(err error) {
	switch {
	case errors.Is(err, net.ErrClosed):
		r.retire()
	case errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.EAGAIN):
		r.cancel()
	default:
		r.fail(err)
	}
}

// readEnded ends the report of a sub-link whose receive ended with err.
func (r *flowReport) readEnded(err error) {
	if errors.Is(err, net.ErrClosed) {
		r.retire()
		return
	}
	r.fail(err)
}

// beginRefusal is a refused Begin: the sub-link is refused, not failed.
type beginRefusal struct{ err error }

func (e *beginRefusal) Error() string { return "score refused the plan: " + e.err.Error() }
func (e *beginRefusal) Unwrap() error { return e.err }
