package transport

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"time"
)

// wsChunk is the most payload one frame carries; a longer Write is sent as
// several frames.
const wsChunk = 16 * 1024

// closeWait bounds the write of the close frame on Close.
const closeWait = time.Second

// wsBufPool holds the buffers a frame is masked into: taken for one Write,
// so an idle flow holds none.
var wsBufPool = sync.Pool{New: func() any { b := make([]byte, 0, maxFrameHeader+wsChunk); return &b }}

var errWSInsideFrame = framingError("ws: the connection closed inside a frame")

// wsConn is a client WebSocket over an upgraded connection: every Write is
// sent as masked binary frames, Read returns the payload of the server's
// data frames, answers pings, and ends at the server's close frame. It
// cannot half-close. Deadlines are the connection's own.
type wsConn struct {
	net.Conn
	br *bufio.Reader

	// Reader side, owned by the reading goroutine.
	remaining int64 // payload bytes left in the current data frame
	rerr      error // final: the close frame came, or the stream broke

	// wmu serialises frames on the wire (Write, the pong of a ping, the
	// close frame); it guards closeSent.
	wmu       sync.Mutex
	closeSent bool
	closeOnce sync.Once
	closeErr  error
}

func newWSConn(c net.Conn, br *bufio.Reader) *wsConn { return &wsConn{Conn: c, br: br} }

// Read returns the next payload bytes. A deadline that fires keeps the
// frame state, so the next Read goes on where this one stopped.
func (c *wsConn) Read(p []byte) (int, error) {
	for c.remaining == 0 {
		if c.rerr != nil {
			return 0, c.rerr
		}
		if err := c.nextFrame(); err != nil {
			return 0, err
		}
	}
	if int64(len(p)) > c.remaining {
		p = p[:c.remaining]
	}
	n, err := c.br.Read(p)
	c.remaining -= int64(n)
	if err == io.EOF {
		err = errWSInsideFrame
		c.rerr = err
	}
	return n, err
}

// nextFrame reads one frame header and handles control frames whole. It
// returns nil when a data frame's payload is next (remaining may be 0).
func (c *wsConn) nextFrame() error {
	b, err := c.br.Peek(2)
	if err != nil {
		if len(b) == 0 && err == io.EOF {
			c.rerr = io.EOF // the server went without a close frame
			return io.EOF
		}
		return c.readFailed(err)
	}
	h, need, err := parseFrameHeader(b)
	if err != nil {
		c.rerr = err
		return err
	}
	if need > len(b) {
		if b, err = c.br.Peek(need); err != nil {
			return c.readFailed(err)
		}
		if h, _, err = parseFrameHeader(b); err != nil {
			c.rerr = err
			return err
		}
	}
	if h.opcode < opClose {
		c.br.Discard(h.hdrSize)
		c.remaining = h.length
		return nil
	}
	// A control frame is read whole before any of it is consumed, so a
	// deadline in its middle loses nothing.
	whole, err := c.br.Peek(h.hdrSize + int(h.length))
	if err != nil {
		return c.readFailed(err)
	}
	var payload [maxControlPayload]byte
	n := copy(payload[:], whole[h.hdrSize:])
	c.br.Discard(len(whole))
	switch h.opcode {
	case opPing:
		return c.writeControl(opPong, payload[:n])
	case opClose:
		// Echo the status code, then the stream is over.
		c.writeControl(opClose, payload[:min(n, 2)])
		c.rerr = io.EOF
		return io.EOF
	}
	return nil
}

// readFailed keeps a deadline error retryable and makes any other final.
func (c *wsConn) readFailed(err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return err
	}
	if err == io.EOF {
		err = errWSInsideFrame
	}
	if c.rerr == nil {
		c.rerr = err
	}
	return c.rerr
}

// Write sends p as binary frames of at most wsChunk bytes each.
func (c *wsConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closeSent {
		return 0, net.ErrClosed
	}
	bp := wsBufPool.Get().(*[]byte)
	defer wsBufPool.Put(bp)
	n := 0
	for n < len(p) {
		chunk := p[n:min(len(p), n+wsChunk)]
		if err := c.writeFrame(bp, opBinary, chunk); err != nil {
			return n, err
		}
		n += len(chunk)
	}
	return n, nil
}

// writeFrame masks one frame into *bp and writes it; wmu is held.
func (c *wsConn) writeFrame(bp *[]byte, opcode byte, payload []byte) error {
	var key [4]byte
	binary.LittleEndian.PutUint32(key[:], rand.Uint32())
	b := appendFrameHeader((*bp)[:0], opcode, len(payload), key)
	h := len(b)
	b = b[:h+len(payload)]
	maskInto(b[h:], payload, key)
	*bp = b
	_, err := c.Conn.Write(b)
	return err
}

// writeControl sends a pong or the close frame; nothing follows a close.
func (c *wsConn) writeControl(opcode byte, payload []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closeSent {
		return nil
	}
	if opcode == opClose {
		c.closeSent = true
	}
	var buf [maxFrameHeader + maxControlPayload]byte
	b := buf[:0]
	return c.writeFrame(&b, opcode, payload)
}

// Close sends a close frame (1000, normal closure) unless a Write is stuck
// on the wire, and closes the connection.
func (c *wsConn) Close() error {
	c.closeOnce.Do(func() {
		if c.wmu.TryLock() {
			if !c.closeSent {
				c.closeSent = true
				c.Conn.SetWriteDeadline(time.Now().Add(closeWait))
				var buf [maxFrameHeader + 2]byte
				b := buf[:0]
				c.writeFrame(&b, opClose, []byte{0x03, 0xE8})
			}
			c.wmu.Unlock()
		}
		c.closeErr = c.Conn.Close()
	})
	return c.closeErr
}
