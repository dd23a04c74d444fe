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

// wsReadBuf is the room a wsConn reads frame headers into. Payload that
// comes with a header is handed out from there; the rest of a frame is
// read straight into the caller's buffer.
const wsReadBuf = responseBuf

// wsConn is a client WebSocket over an upgraded connection: every Write is
// sent as masked binary frames, Read returns the payload of the server's
// data frames, answers pings, and ends at the server's close frame. It
// cannot half-close. Deadlines are the connection's own.
//
// A Read waits for the first payload byte only: it then goes on through
// the frames already received (over TLS, the records already received), as
// far as its buffer has room, so a relay writes a read's worth at once
// however small the server's frames are.
type wsConn struct {
	net.Conn

	// Reader side, owned by the reading goroutine.
	rb        []byte // rb[r:w]: read from the connection, not yet used
	r, w      int
	remaining int64 // payload bytes left in the current data frame
	rerr      error // final: the close frame came, or the stream broke
	// received reads what the connection already received, without
	// waiting (0: nothing yet); nil when the connection cannot.
	received func(p []byte) int

	// wmu serialises frames on the wire (Write, the pong of a ping, the
	// close frame); it guards closeSent.
	wmu       sync.Mutex
	closeSent bool
	closeOnce sync.Once
	closeErr  error
}

// newWSConn takes over c after the upgrade, with what br read past the
// 101 answer.
func newWSConn(c net.Conn, br *bufio.Reader) *wsConn {
	ws := &wsConn{Conn: c, rb: make([]byte, max(wsReadBuf, br.Buffered()))}
	b, _ := br.Peek(br.Buffered())
	ws.w = copy(ws.rb, b)
	ws.received = receivedReader(c)
	return ws
}

// receivedReader is how to read what c already received without waiting:
// a TLS stream's records (TLSStream), a TCP conn's bytes; nil for any
// other connection.
func receivedReader(c net.Conn) func(p []byte) int {
	switch c := c.(type) {
	case interface{ ReadReceived(p []byte) int }:
		return c.ReadReceived
	case *net.TCPConn:
		nw := &tcpNoWait{c: c}
		return func(p []byte) int {
			n, _ := nw.read(p) // nothing yet, or an end the next read reports
			return n
		}
	}
	return nil
}

// Read returns the next payload bytes: it waits for the first, then adds
// what was already received, frame after frame, while p has room. A
// deadline that fires keeps the frame state, so the next Read goes on
// where this one stopped.
func (c *wsConn) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		wait := n == 0
		if c.remaining == 0 {
			if c.rerr != nil {
				break
			}
			more, err := c.nextFrame(wait)
			if err != nil {
				if n > 0 {
					break // the next Read reports it
				}
				return 0, err
			}
			if !more {
				break
			}
			continue
		}
		k, err := c.payload(p[n:], wait)
		n += k
		if err != nil {
			return n, err
		}
		if k == 0 {
			break
		}
	}
	if n == 0 && c.rerr != nil && len(p) > 0 {
		return 0, c.rerr
	}
	return n, nil
}

// payload reads bytes of the current data frame into p: those already
// read with its header, else from the connection, waiting for them when
// wait is set.
func (c *wsConn) payload(p []byte, wait bool) (int, error) {
	p = p[:min(int64(len(p)), c.remaining)]
	if c.r < c.w {
		k := copy(p, c.rb[c.r:c.w])
		c.r += k
		c.remaining -= int64(k)
		return k, nil
	}
	if !wait {
		if c.received == nil {
			return 0, nil
		}
		k := c.received(p)
		c.remaining -= int64(k)
		return k, nil
	}
	k, err := c.Conn.Read(p)
	c.remaining -= int64(k)
	if err != nil {
		err = c.readFailed(err)
		if k > 0 && c.rerr != nil {
			err = nil // the bytes first; the next Read reports the end
		}
	}
	return k, err
}

// fill reads more of the connection after rb[r:w]: at least one byte when
// wait is set, what was already received otherwise (more false: none).
func (c *wsConn) fill(wait bool) (more bool, err error) {
	if c.r == c.w {
		c.r, c.w = 0, 0
	} else if c.r > 0 && len(c.rb)-c.w < maxFrameHeader+maxControlPayload {
		c.w = copy(c.rb, c.rb[c.r:c.w])
		c.r = 0
	}
	if !wait {
		if c.received == nil {
			return false, nil
		}
		k := c.received(c.rb[c.w:])
		c.w += k
		return k > 0, nil
	}
	for {
		k, err := c.Conn.Read(c.rb[c.w:])
		c.w += k
		if k > 0 {
			return true, nil
		}
		if err != nil {
			if err == io.EOF && c.r == c.w {
				c.rerr = io.EOF // the server went without a close frame
				return false, io.EOF
			}
			return false, c.readFailed(err)
		}
	}
}

// nextFrame takes the next frame's header and handles a control frame
// whole. It returns true once a data frame's payload is next (remaining
// may be 0) or a control frame was handled, false when wait is not set
// and the header has not been received whole yet (nothing is consumed).
func (c *wsConn) nextFrame(wait bool) (bool, error) {
	for {
		h, need, err := parseFrameHeader(c.rb[c.r:c.w])
		if err != nil {
			c.rerr = err
			return false, err
		}
		if need <= c.w-c.r {
			if h.opcode < opClose {
				c.r += h.hdrSize
				c.remaining = h.length
				return true, nil
			}
			// A control frame is read whole before any of it is
			// consumed, so a deadline in its middle loses nothing.
			need = h.hdrSize + int(h.length)
		}
		if need <= c.w-c.r {
			return true, c.control(h)
		}
		more, err := c.fill(wait)
		if err != nil || !more {
			return false, err
		}
	}
}

// control handles the control frame at rb[r:], whole there.
func (c *wsConn) control(h frameHeader) error {
	var payload [maxControlPayload]byte
	n := copy(payload[:], c.rb[c.r+h.hdrSize:c.r+h.hdrSize+int(h.length)])
	c.r += h.hdrSize + int(h.length)
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
