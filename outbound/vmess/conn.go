package vmess

import (
	"errors"
	"fmt"
	"net"
	"sync"

	"switchyard/netx"
	protocol "switchyard/protocol/vmess"
)

// minChunkRoom is the least payload room for which a chunk is added to a
// staging buffer that already holds one; with less, the buffer is sent first.
const minChunkRoom = 4096

var errWriteClosed = errors.New("vmess: write after CloseWrite")

// streamConn is a TCP flow through VMess. Read and Write may run at once,
// each from one goroutine; Close may come from any. Deadlines and addresses
// are the upstream connection's.
type streamConn struct {
	net.Conn // the upstream

	rd      frameReader
	pending []byte // the rest of the last chunk read

	enc  *protocol.Encoder
	werr error

	closeOnce sync.Once
	closeErr  error
}

func newStreamConn(c net.Conn, s *protocol.Session) *streamConn {
	return &streamConn{Conn: c, rd: newFrameReader(c, s), enc: s.NewEncoder()}
}

// newMuxConn is the stream an XUDP link rides: a streamConn whose reader
// holds its bufSize buffer only while bytes are in it (newReleasingReader),
// so that an idle association holds no buffer of that size.
func newMuxConn(c net.Conn, s *protocol.Session) *streamConn {
	return &streamConn{Conn: c, rd: newReleasingReader(c, s), enc: s.NewEncoder()}
}

// A write stages its sealed chunks in a buffer taken for that write only:
// startBuf when the write fits it, else bufSize. No flow holds a staging
// buffer between writes, and the pools keep only what writes gave back
// (sync.Pool, emptied by the garbage collector), so a write allocates
// nothing in steady state.
var (
	smallStages = sync.Pool{New: func() any { b := make([]byte, 0, startBuf); return &b }}
	largeStages = sync.Pool{New: func() any { b := make([]byte, 0, bufSize); return &b }}
)

// getStage returns an empty staging buffer for a write of n bytes.
func getStage(n int) *[]byte {
	if n+protocol.ChunkOverhead <= startBuf {
		return smallStages.Get().(*[]byte)
	}
	return largeStages.Get().(*[]byte)
}

// putStage gives a staging buffer back to its pool.
func putStage(bp *[]byte) {
	*bp = (*bp)[:0]
	if cap(*bp) == startBuf {
		smallStages.Put(bp)
	} else {
		largeStages.Put(bp)
	}
}

// Read returns the server's payload. The response header is opened on the
// first Read; a header that does not answer this request fails the flow.
func (c *streamConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if len(c.pending) == 0 {
		if c.rd.dec.Raw() {
			return c.rd.readRaw(p)
		}
		payload, err := c.rd.next()
		if err != nil {
			return 0, err
		}
		c.pending = payload
	}
	n := copy(p, c.pending)
	c.pending = c.pending[n:]
	// Chunks already read from the upstream join this Read while p has
	// room: a server's small chunks (Xray's are 8 KiB) then cost one write
	// downstream per read of the upstream, not one per chunk.
	for n < len(p) && len(c.pending) == 0 {
		payload := c.rd.buffered()
		if payload == nil {
			break
		}
		m := copy(p[n:], payload)
		n += m
		c.pending = payload[m:]
	}
	return n, nil
}

// Write seals p in chunks of at most the encoder's MaxPayload (8 KiB, as
// Xray's client frames them), as many as fit the staging buffer per write
// to the upstream (see getStage).
func (c *streamConn) Write(p []byte) (int, error) {
	if c.werr != nil {
		return 0, c.werr
	}
	if !c.enc.Framed() {
		n, err := c.Conn.Write(p)
		if err != nil {
			c.werr = err
		}
		return n, err
	}
	bp := getStage(len(p))
	defer putStage(bp)
	written := 0
	for len(p) > 0 {
		buf, taken := (*bp)[:0], 0
		for taken < len(p) {
			room := cap(buf) - len(buf) - protocol.ChunkOverhead
			left := len(p) - taken
			if len(buf) > 0 && room < left && room < minChunkRoom {
				break
			}
			n := min(left, room, c.enc.MaxPayload())
			var err error
			if buf, err = c.enc.Seal(buf, p[taken:taken+n]); err != nil {
				c.werr = err
				return written, err
			}
			taken += n
		}
		if _, err := c.Conn.Write(buf); err != nil {
			c.werr = err
			return written, err
		}
		written += taken
		p = p[taken:]
	}
	return written, nil
}

// CloseWrite ends the body with its end chunk, then half-closes the
// upstream. An unframed body ends only with the upstream's half-close.
func (c *streamConn) CloseWrite() error {
	if c.werr != nil {
		return c.werr
	}
	c.werr = errWriteClosed
	if c.enc.Framed() {
		bp := getStage(0)
		end, err := c.enc.SealEnd((*bp)[:0])
		if err == nil {
			_, err = c.Conn.Write(end)
		}
		putStage(bp)
		if err != nil {
			return err
		}
	}
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		err := cw.CloseWrite()
		if errors.Is(err, netx.ErrEndUnsignalled) && c.enc.Framed() {
			return nil // the end chunk told the server
		}
		return err
	}
	if c.enc.Framed() {
		return nil
	}
	return fmt.Errorf("vmess: the upstream %T cannot half-close an unframed body", c.Conn)
}

// Close closes the upstream; it is idempotent.
func (c *streamConn) Close() error {
	c.closeOnce.Do(func() { c.closeErr = c.Conn.Close() })
	return c.closeErr
}

// Carrier is the transport's stream under the VMess chunks
// (netx.Carrier). Not NetConn: the relay must not move bytes on it
// directly.
func (c *streamConn) Carrier() net.Conn { return c.Conn }
