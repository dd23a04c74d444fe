package transport

import (
	"context"
	"io"
	"net"
	"sync"
	"time"
)

// hunkData is the most payload one gRPC message carries: the message then
// fills one DATA frame of the default size.
const hunkData = rxChunkSize - maxHunkPrefix

// hunkBufPool holds the buffers a message is built in, taken for one Write.
var hunkBufPool = sync.Pool{New: func() any { b := make([]byte, 0, maxHunkPrefix+hunkData); return &b }}

// grpcConn is a flow over one gRPC call: each Write is sent as messages of
// one data field, and Read returns the data fields of the server's
// messages. The same bytes serve gun (Hunk) and multi (MultiHunk).
// CloseWrite ends the request body.
type grpcConn struct {
	s    *h2Stream
	dec  hunkDecoder // the reading goroutine's
	rerr error       // final read error

	wmu sync.Mutex // keeps one Write's messages together

	// release gives back the call's hold on its connection, once.
	release   func()
	closeOnce sync.Once
	// adopt, on a stream of a speculative dial's own connection, offers
	// that connection to the shared slot (Commit); nil otherwise.
	adopt func()
}

func newGRPCConn(s *h2Stream, release func()) *grpcConn {
	return &grpcConn{s: s, release: release}
}

// Commit (netx.Committer) puts the connection of a speculative dial's
// stream in service, when the slot has none: the next dials open their
// streams on it. Otherwise the stream keeps its own connection, which
// closes with it.
func (g *grpcConn) Commit(context.Context) {
	if g.adopt != nil {
		g.adopt()
	}
}

// Read returns the payload of the server's messages as it arrives.
func (g *grpcConn) Read(p []byte) (int, error) {
	if g.rerr != nil {
		return 0, g.rerr
	}
	if len(p) == 0 {
		return 0, nil
	}
	for {
		b, err := g.s.peek()
		if err != nil {
			if err == io.EOF && !g.dec.atBoundary() {
				err = errHunkTruncated
			}
			if !isTimeout(err) {
				g.rerr = err
			}
			return 0, err
		}
		nin, nout, derr := g.dec.feed(b, p)
		g.s.consume(nin)
		if derr != nil {
			g.rerr = derr
			g.s.fail(derr, true)
			return nout, derr
		}
		if nout > 0 {
			return nout, nil
		}
	}
}

// Write sends p as messages of at most hunkData bytes each.
func (g *grpcConn) Write(p []byte) (int, error) {
	g.wmu.Lock()
	defer g.wmu.Unlock()
	bp := hunkBufPool.Get().(*[]byte)
	defer hunkBufPool.Put(bp)
	n := 0
	for n < len(p) {
		chunk := p[n:min(len(p), n+hunkData)]
		*bp = appendHunk((*bp)[:0], chunk)
		if err := g.s.send(*bp); err != nil {
			return n, err
		}
		n += len(chunk)
	}
	return n, nil
}

// CloseWrite ends the request body; the response goes on.
func (g *grpcConn) CloseWrite() error {
	g.wmu.Lock()
	defer g.wmu.Unlock()
	return g.s.closeWrite()
}

// Close ends the call and gives back its hold on the connection.
func (g *grpcConn) Close() error {
	g.s.close()
	g.closeOnce.Do(g.release)
	return nil
}

func (g *grpcConn) LocalAddr() net.Addr  { return g.s.c.raw.LocalAddr() }
func (g *grpcConn) RemoteAddr() net.Addr { return g.s.c.raw.RemoteAddr() }

func (g *grpcConn) SetDeadline(t time.Time) error {
	g.s.setReadDeadline(t)
	g.s.setWriteDeadline(t)
	return nil
}

func (g *grpcConn) SetReadDeadline(t time.Time) error {
	g.s.setReadDeadline(t)
	return nil
}

func (g *grpcConn) SetWriteDeadline(t time.Time) error {
	g.s.setWriteDeadline(t)
	return nil
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
