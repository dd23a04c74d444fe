// Package relay copies bytes both ways between two connections until both
// directions have ended, honouring half-close, with an idle timeout, and
// says how the flow ended (End).
package relay

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"switchyard/netx"
)

// DefaultIdle is how long a flow may move no byte in either direction before
// the relay ends it.
const DefaultIdle = 5 * time.Minute

// unsignalledIdle is the idle window of the direction left open when the
// other ended on a conn that cannot tell its peer so
// (netx.ErrEndUnsignalled). The peer keeps that direction open for as long
// as it keeps its own, so without a bound of its own a flow whose client
// closed (a browser closing an idle keep-alive connection looks the same
// as a half-close) would hold its server connection for the whole
// DefaultIdle. Two seconds leaves a response that is still coming after
// the half-close time to start (each byte that moves restarts the window),
// and is about what Xray's client gives every half-closed flow (its
// downlinkOnly policy, one second).
var unsignalledIdle = 2 * time.Second

// The userspace path copies through one pooled buffer per direction: a
// small one at first and whenever the source had little to give, the large
// one once a read fills the small one (or, on a plain TCP source, once more
// than the small one holds is queued). A direction waiting on a quiet
// source holds a small buffer, or none when the source is a plain TCP
// socket (it waits for bytes first, as the splice path does), so an idle
// flow holds little; a bulk flow reads in large buffers. The buffers come
// from two sync.Pools, which hold only what flows gave back and are emptied
// by the garbage collector, so no read allocates in steady state.
const (
	bufSize   = 32 * 1024 // the large buffer
	smallSize = 4 * 1024  // the small buffer; a read of at most this much gives the large one back
)

// spliceChunk bounds one splice call sequence so byte counts stay current.
const spliceChunk = 1 << 20

var (
	bufPool   = sync.Pool{New: func() any { b := make([]byte, bufSize); return &b }}
	smallPool = sync.Pool{New: func() any { b := make([]byte, smallSize); return &b }}
)

// copyBuf is a direction's current buffer and the pool it goes back to.
type copyBuf struct{ b *[]byte }

func (c *copyBuf) get(large bool) {
	if large {
		c.b = bufPool.Get().(*[]byte)
	} else {
		c.b = smallPool.Get().(*[]byte)
	}
}

func (c *copyBuf) put() {
	if c.b == nil {
		return
	}
	if len(*c.b) == bufSize {
		bufPool.Put(c.b)
	} else {
		smallPool.Put(c.b)
	}
	c.b = nil
}

// fit swaps the buffer for the next read after a read of n bytes: the large
// one after a read that filled the small one, the small one after a read
// of little.
func (c *copyBuf) fit(n int) {
	large := len(*c.b) == bufSize
	switch {
	case !large && n == len(*c.b):
		c.put()
		c.get(true)
	case large && n <= smallSize:
		c.put()
		c.get(false)
	}
}

// Path says how one direction was copied.
type Path uint8

const (
	// PathCopy moved bytes through a userspace buffer.
	PathCopy Path = iota
	// PathSplice moved bytes between two plain TCP sockets in the kernel.
	PathSplice
)

// Result reports one relay: bytes a→b and b→a, how each direction went,
// and how the flow ended.
type Result struct {
	AToB, BToA         int64
	PathAToB, PathBToA Path
	End                End
}

// Pipe relays between a, the client's conn, and b, the upstream's, until
// both directions end (EOF from each side, an error, no byte either way for
// idle, or ctx done — its owner stopping). It closes both conns, tells the
// EndObserver on b (if any) how the flow ended, and returns. idle <= 0
// means DefaultIdle.
func Pipe(ctx context.Context, a, b net.Conn, idle time.Duration) Result {
	if idle <= 0 {
		idle = DefaultIdle
	}
	var (
		res  Result
		once sync.Once
		wg   sync.WaitGroup
		end  ending
	)
	closeBoth := func() {
		end.close(nil)
		once.Do(func() {
			a.Close()
			b.Close()
		})
	}
	ab := &direction{src: a, dst: b, srcIs: EndClient, dstIs: EndUpstream}
	ba := &direction{src: b, dst: a, srcIs: EndUpstream, dstIs: EndClient}
	ab.idleFor.Store(int64(idle))
	ba.idleFor.Store(int64(idle))
	ab.other, ba.other = ba, ab
	ab.setup()
	ba.setup()
	// A half-closed flow may wait on one side only; closing both ends is
	// what wakes it when the owner stops.
	stop := context.AfterFunc(ctx, func() {
		end.close(context.Cause(ctx))
		closeBoth()
	})
	defer stop()
	run := func(d *direction, n *int64, p *Path) {
		defer wg.Done()
		err := d.run()
		*n, *p = d.n, d.path
		d.done.Store(true)
		end.note(d.ender(err), err)
		if err == nil {
			if cw, ok := d.dst.(interface{ CloseWrite() error }); ok {
				switch err := cw.CloseWrite(); {
				case err == nil:
					// Half-close: the other direction goes on alone, with a
					// whole idle window from this end of stream.
					d.other.arm()
					return
				case errors.Is(err, netx.ErrEndUnsignalled):
					// The peer cannot learn of the end, so it will not end
					// the other direction for it: that goes on while bytes
					// move, with a short idle window.
					d.other.shorten(unsignalledIdle)
					d.other.arm()
					return
				}
			}
		}
		closeBoth()
	}
	wg.Add(2)
	go run(ab, &res.AToB, &res.PathAToB)
	run(ba, &res.BToA, &res.PathBToA)
	wg.Wait()
	closeBoth()
	res.End = end.end()
	if o := observer(b); o != nil {
		o.FlowEnded(res.End)
	}
	return res
}

// direction is one half of a relay. A read that times out with no byte moved
// marks the direction idle; the flow ends once both are idle (or the other has
// ended). Because the splice path reports progress only when a read returns,
// an idle direction that finds the other marked idle pokes it (a read
// deadline of now) so it reports whether bytes moved meanwhile.
type direction struct {
	src, dst net.Conn
	idleFor  atomic.Int64 // a time.Duration; shortened by the other direction's unsignalled end
	other    *direction
	idle     atomic.Bool
	poked    atomic.Bool // the other direction asked this one to report
	done     atomic.Bool
	deadline net.Conn // the conn whose read deadline bounds this direction

	n    int64
	path Path

	// srcIs and dstIs are the sides src and dst are on; atDst is set when
	// the error run returned came from writing dst (or, splicing, was
	// found to).
	srcIs, dstIs Cause
	atDst        bool

	tcpSrc, tcpDst       *net.TCPConn
	srcLayers, dstLayers []netx.Observed
	paced                []pacedLayer    // the Paced layers of a spliced direction
	waitSrc              syscall.RawConn // the copy path's source socket, when reading it is reading src
	settling             bool            // copying until a Passthrough end is done with its preamble
}

func (d *direction) poke() {
	if c := d.deadline; c != nil {
		d.poked.Store(true)
		c.SetReadDeadline(time.Now())
	}
}

func (d *direction) arm() {
	d.deadline.SetReadDeadline(time.Now().Add(time.Duration(d.idleFor.Load())))
}

// shorten bounds the direction's idle window to w.
func (d *direction) shorten(w time.Duration) {
	if int64(w) < d.idleFor.Load() {
		d.idleFor.Store(int64(w))
	}
}

// progress records moved bytes; quiet handles a read that timed out empty and
// reports whether the flow is over.
func (d *direction) progress() { d.idle.Store(false) }

// The flow is over when the other direction has ended, or when both are idle
// and this one, poked by the other, confirms it moved nothing since its own
// silent window. A poke that lands just after this direction moved bytes is
// not a silent window.
func (d *direction) quiet() bool {
	poked := d.poked.Swap(false)
	if poked && !d.idle.Load() {
		return false
	}
	d.idle.Store(true)
	if d.other.done.Load() {
		return true
	}
	if d.other.idle.Load() {
		if poked {
			return true
		}
		d.other.poke()
	}
	return false
}

// setup picks the path and the conn whose read deadline bounds the
// direction.
func (d *direction) setup() {
	d.pick()
	d.deadline = d.src
	if d.path == PathSplice {
		d.deadline = d.tcpSrc
	}
	d.settling = d.path == PathCopy && (netx.Settling(d.src, true) || netx.Settling(d.dst, false))
}

// pick chooses splice when both ends are plain TCP sockets under nothing but
// Observed wrappers and Passthrough conns done with their preamble, a
// userspace copy otherwise.
func (d *direction) pick() {
	rawSrc, srcLayers := netx.Unwrap(d.src, true)
	rawDst, dstLayers := netx.Unwrap(d.dst, false)
	ts, okSrc := rawSrc.(*net.TCPConn)
	td, okDst := rawDst.(*net.TCPConn)
	if okSrc && okDst {
		d.path = PathSplice
		d.tcpSrc, d.tcpDst, d.srcLayers, d.dstLayers = ts, td, srcLayers, dstLayers
		d.paced = pacedLayers(d.paced[:0], srcLayers, dstLayers)
		return
	}
	d.path = PathCopy
	d.waitSrc = nil
	if okSrc && canWaitQueued {
		if rc, err := ts.SyscallConn(); err == nil {
			d.waitSrc = rc
		}
	}
}

// ender is who ended the direction that run ended with err.
func (d *direction) ender(err error) Cause {
	switch {
	case err == ErrIdle:
		return EndIdle
	case d.atDst:
		return d.dstIs
	}
	return d.srcIs
}

func (d *direction) run() error {
	if d.path == PathSplice {
		return d.splice(d.tcpSrc, d.tcpDst, d.srcLayers, d.dstLayers)
	}
	return d.copy()
}

// resettle picks the path again once a Passthrough conn on either end is
// done with its preamble, and reports whether the direction may now splice.
// The read deadline stays on d.src, which reaches the same socket (the
// other direction may be poking it).
func (d *direction) resettle() bool {
	if netx.Settling(d.src, true) || netx.Settling(d.dst, false) {
		return false
	}
	d.settling = false
	d.pick()
	return d.path == PathSplice
}

// splice moves bytes with (*net.TCPConn).ReadFrom over a LimitedReader of the
// source TCPConn, which Go implements with splice(2) on Linux. Go holds a pipe
// pair for as long as one ReadFrom runs, waiting included, so the relay first
// waits for the source to have bytes queued and then splices exactly those:
// an idle flow holds no pipe.
func (d *direction) splice(src, dst *net.TCPConn, srcLayers, dstLayers []netx.Observed) error {
	rc, err := src.SyscallConn()
	if err != nil {
		return err
	}
	lr := &io.LimitedReader{R: src}
	for {
		d.arm()
		queued, err := waitQueued(rc)
		switch {
		case err != nil && isTimeout(err):
			if d.quiet() {
				return ErrIdle
			}
			continue
		case err != nil:
			return err
		case queued == 0: // end of stream
			return nil
		}
		lr.N = d.step(int64(min(queued, spliceChunk)))
		n, err := dst.ReadFrom(lr)
		if n > 0 {
			d.n += n
			d.progress()
			for _, l := range srcLayers {
				l.ObserveRead(n)
			}
			for _, l := range dstLayers {
				l.ObserveWrite(n)
			}
			if perr := d.pace(n); perr != nil {
				d.atDst = true // the pacing of the flow, which its owner ended
				return perr
			}
		}
		switch {
		case err != nil && isTimeout(err):
			if n == 0 && d.quiet() {
				return ErrIdle
			}
		case err != nil:
			d.atDst = spliceFailedAtDst(src, dst, err)
			return err
		case n == 0: // queued bytes vanished: the source ended
			return nil
		}
	}
}

func (d *direction) copy() error {
	var buf copyBuf
	defer buf.put()
	for {
		d.arm()
		if buf.b == nil && d.waitSrc != nil {
			// A plain TCP source: wait for bytes holding no buffer.
			queued, err := waitQueued(d.waitSrc)
			switch {
			case err != nil && isTimeout(err):
				if d.quiet() {
					return ErrIdle
				}
				continue
			case err != nil:
				return err
			case queued == 0: // end of stream
				return nil
			}
			buf.get(queued > smallSize)
		} else if buf.b == nil {
			buf.get(false)
		}
		n, err := d.src.Read(*buf.b)
		if n > 0 {
			d.progress()
			w, werr := d.dst.Write((*buf.b)[:n])
			d.n += int64(w)
			if werr != nil {
				d.atDst = true
				return werr
			}
			if d.settling && err == nil && d.resettle() {
				// The splice path needs no buffer: give it back for
				// the rest of the flow.
				buf.put()
				return d.splice(d.tcpSrc, d.tcpDst, d.srcLayers, d.dstLayers)
			}
			buf.fit(n)
			if d.waitSrc != nil && len(*buf.b) == smallSize {
				buf.put() // little came: wait for the next bytes without it
			}
		}
		switch {
		case err == io.EOF:
			return nil
		case err != nil && isTimeout(err):
			if n == 0 && d.quiet() {
				return ErrIdle
			}
		case err != nil:
			return err
		}
	}
}

func isTimeout(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }
